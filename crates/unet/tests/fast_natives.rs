//! The natives' fast forms against their ordinary forms: the JIT calls a
//! native's fast form ([`jive::FastNative`], bound by [`unet::natives::bind`])
//! and the interpreter the ordinary closure, so one applet run on both
//! engines, against two copies of one endpoint, under one stream of
//! random and adversarial calls, must give the same values, the same
//! traps (kind and message) and leave the two endpoints and applets the
//! same after every call: the area, the queues, the messages sent, the
//! budget's count and its clock readings.
//!
//! The host charges like the engine's (`Io`): a work count, a clock
//! reading every few units, and a budget that runs out mid-stream, after
//! which every native call traps as over budget. Like the engine, it lends
//! its count, its next clock reading and its buffer size to the JIT's
//! inline `getFreeBufferLength` ([`jive::HostWords`]), in some streams only,
//! and in some with a buffer size an `int` cannot hold; and, in most of
//! those, its receive queue's free run to the inline `dmaRxdPayload`
//! ([`jive::RingWords`]): a real queue in a shared segment of 1 to 8
//! slots, which the application drains now and then (so that it is often
//! full, and the producer's view of the consumer's index often stale when
//! the run is lent). And in most of the streams that lend, its free
//! queue's ready entries to the inline `getFreeBuffer`
//! ([`jive::QueueWords`]): a real queue of 1 to 16 entries in the same
//! segment, which the application fills now and then with valid and
//! invalid entries (and, rarely, a corrupt producer index), while the
//! endpoint sometimes holds spare buffers it gives first.
#![cfg(not(loom))]
#![cfg(target_arch = "x86_64")]

use std::sync::Arc;

use jive::{
    Applet, AreaWords, Engine, HostWords, InvokeError, Limits, Object, QueueWords, RingWords,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use unet::applets;
use unet::layout::{QueueLayout, RxDesc};
use unet::natives::{HostError, NativeHost, RxBody, bind};
use unet::ring::{Consumer, Producer, QueueMem};
use unet::shm::{FreeQueue, RxQueue, Segment};

const BUF: u32 = 512;
const BUFFERS: u32 = 8;
const AREA: u32 = BUF * BUFFERS;
/// Work units between two clock readings (the engine's is 256).
const CHECK_EVERY: u64 = 8;

/// A receive descriptor as the application read it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Rx {
    Inline(u16, Vec<u8>),
    Buffers(u16, u32, Vec<u32>),
}

/// An endpoint that counts what it is charged as the engine's does.
#[derive(Debug)]
struct Counting {
    /// The buffer area: a shared segment of its own, lent to the inline
    /// `doHtoLDMA` and `doLtoHDMA` (`words.area`) in most streams.
    area: Arc<Segment>,
    /// Calls of `read_area` and `write_area` (not compared: the inline
    /// copies make none).
    copies: std::cell::Cell<u64>,
    /// The free queue: the endpoint's side and the application's, the
    /// buffers the endpoint holds (given first, as `Io::take_buffer`
    /// does), and the invalid entries and corrupt indices it counted.
    free: Consumer<u32, FreeQueue>,
    fill: Producer<u32, FreeQueue>,
    spare: Vec<u32>,
    free_invalid: u64,
    corrupt: u64,
    /// Calls of `pop_free` (not compared: the inline pop makes none).
    pops: u64,
    /// Calls of `push_rx` (not compared: the inline pushes make none).
    pushes: u64,
    /// The descriptors the application took from the receive queue, in
    /// order.
    rx: Vec<Rx>,
    /// The receive queue: the endpoint's side and the application's, and
    /// its segment (its slots' raw bytes are compared: the inline push
    /// must leave each slot as the native's push does, seal and all).
    ring: Producer<RxDesc, RxQueue>,
    app: Consumer<RxDesc, RxQueue>,
    rx_seg: Arc<Segment>,
    rx_depth: u32,
    sent: Vec<(u16, Vec<u8>)>,
    open: Vec<u16>,
    max_message: u32,
    /// The buffer size getFreeBufferLength reports.
    size: u32,
    /// Work units charged (`work`), where the next clock reading is due
    /// (`bound`), the buffer size as an `int` (`ints[0]`) and the receive
    /// queue's free run (`ring`, if `lend_ring`), which the host lends the
    /// inline natives if `lend`.
    words: HostWords,
    lend: bool,
    /// Clock readings made, and the work the budget allows.
    checks: u64,
    budget: u64,
}

impl PartialEq for Counting {
    fn eq(&self, o: &Counting) -> bool {
        self.area_bytes() == o.area_bytes()
            && self.free.lend() == o.free.lend()
            && self.fill.pushed() == o.fill.pushed()
            && self.spare == o.spare
            && (self.free_invalid, self.corrupt) == (o.free_invalid, o.corrupt)
            && self.rx == o.rx
            && self.ring.pushed() == o.ring.pushed()
            && self.rx_slot_bytes() == o.rx_slot_bytes()
            && self.sent == o.sent
            && self.open == o.open
            && self.size == o.size
            && (self.words.work, self.words.bound, self.words.ints)
                == (o.words.work, o.words.bound, o.words.ints)
            && self.checks == o.checks
            && self.budget == o.budget
    }
}

impl Counting {
    /// The area's bytes.
    fn area_bytes(&self) -> Vec<u8> {
        self.area.with_bytes(0, AREA as usize, |b| b.to_vec())
    }

    /// The receive queue's slots, byte for byte (each slot's header word
    /// with its `sealed` byte, and its inline bytes).
    fn rx_slot_bytes(&self) -> Vec<u8> {
        let l = QueueLayout::<RxDesc>::new(0, self.rx_depth);
        let n = self.rx_depth as usize * size_of::<RxDesc>();
        self.rx_seg.with_bytes(l.slots(), n, |b| b.to_vec())
    }

    /// Gives this host an empty free queue of 4 entries (in a segment of
    /// its own named `name`), lent to the inline getFreeBuffer, and the
    /// application's end of it (`fill`).
    fn lend_free_queue(&mut self, name: &str) {
        let seg = Arc::new(Segment::create(name, 4096).unwrap());
        let fq = FreeQueue::new(seg, QueueLayout::new(0, 4)).unwrap();
        self.words.queue = QueueWords::new(Arc::new(fq.free_slots()), AREA, BUF - 1).unwrap();
        self.free = Consumer::new(fq.clone());
        self.fill = Producer::new(fq);
    }

    fn new(rng: &mut StdRng) -> Counting {
        let depth = 1 << rng.random_range(0..4);
        let seg = Arc::new(Segment::create("fast-natives", 4096).unwrap());
        let q = RxQueue::new(seg.clone(), QueueLayout::new(0, depth)).unwrap();
        let rx_seg = seg.clone();
        let lend_ring = rng.random_bool(0.8);
        let ring = if lend_ring {
            RingWords::new(Arc::new(q.rx_slots())).unwrap()
        } else {
            RingWords::default()
        };
        let fdepth = 1 << rng.random_range(0..5);
        let fq = FreeQueue::new(seg, QueueLayout::new(2048, fdepth)).unwrap();
        let lend_queue = rng.random_bool(0.8);
        let queue = if lend_queue {
            QueueWords::new(Arc::new(fq.free_slots()), AREA, BUF - 1).unwrap()
        } else {
            QueueWords::default()
        };
        let mut fill = Producer::new(fq.clone());
        for i in 0..BUFFERS.min(fdepth) {
            fill.push(i * BUF).unwrap();
        }
        let area = Arc::new(Segment::create("fast-natives-area", AREA as usize).unwrap());
        area.with_bytes_mut(0, AREA as usize, |b| {
            for (i, x) in b.iter_mut().enumerate() {
                *x = (i * 7 + 3) as u8;
            }
        });
        let lend_area = rng.random_bool(0.8);
        let area_words = match area.area_bytes(0, AREA) {
            Some(a) if lend_area => AreaWords::new(Arc::new(a)).unwrap(),
            _ => AreaWords::default(),
        };
        Counting {
            area,
            copies: std::cell::Cell::new(0),
            free: Consumer::new(fq),
            fill,
            spare: Vec::new(),
            free_invalid: 0,
            corrupt: 0,
            pops: 0,
            pushes: 0,
            rx: Vec::new(),
            ring: Producer::new(q.clone()),
            app: Consumer::new(q),
            rx_seg,
            rx_depth: depth,
            sent: Vec::new(),
            open: vec![1, 2],
            max_message: 1000,
            size: BUF,
            words: HostWords {
                work: 0,
                bound: CHECK_EVERY,
                ints: [BUF as i32, 0],
                ring,
                queue,
                area: area_words,
                // No channel lent: the inline tail push always calls the
                // native (`tests/tail_inline.rs` tests it on the engine).
                tail: jive::TailWords::default(),
                frame: jive::FrameWords::default(),
            },
            lend: rng.random_bool(0.8),
            checks: 0,
            budget: rng.random_range(20..200),
        }
    }

    /// Lends the receive queue's free run, as `Io::begin` does.
    fn lend_run(&mut self) {
        let (head, room) = self.ring.lend();
        self.words.ring.lend(head, room);
    }

    /// Takes back what the inline pushes filled, as `Io::end` does.
    fn take_run(&mut self) {
        let n = self.words.ring.take();
        self.ring.filled_many(n);
    }

    /// Lends the free queue's ready entries (none while spare buffers
    /// wait), as `Io::pop_free` does after the native's pop.
    fn lend_free(&mut self) {
        let (tail, ready) = self.free.lend();
        let ready = if self.spare.is_empty() { ready } else { 0 };
        self.words.queue.lend(tail, ready);
    }

    /// Takes back the entries the inline pops took, as `Io::pop_free`
    /// does before the native's pop and `Io::end` after each call.
    fn take_free(&mut self) {
        let n = self.words.queue.take();
        self.free.taken_many(n);
    }

    /// Keeps buffer `b` aside, as `Io::push_rx` does when the receive
    /// queue is full: none of the free queue's entries is lent while it
    /// waits.
    fn keep_aside(&mut self, b: u32) {
        self.spare.push(b);
        self.take_free();
        self.lend_free();
    }

    /// The next valid buffer, as `Io::take_buffer` gives it.
    fn take_buffer(&mut self) -> Option<u32> {
        if let Some(b) = self.spare.pop() {
            return Some(b);
        }
        loop {
            let entry = self.free.peek();
            if let Ok(Some(_)) = entry {
                self.free.take();
            }
            match entry {
                Ok(Some(off)) if off < AREA && off % BUF == 0 => return Some(off),
                Ok(Some(_)) => self.free_invalid += 1,
                Ok(None) => return None,
                Err(_) => {
                    self.corrupt += 1;
                    return None;
                }
            }
        }
    }

    /// The application gives back `entries` (as far as the queue has
    /// room), having read the endpoint's index, and publishes them, or a
    /// corrupt producer index if `corrupt` (until the next call).
    fn give(&mut self, entries: &[u32], corrupt: bool) {
        self.free.publish();
        for &e in entries {
            let _ = self.fill.push(e);
        }
        let head = self.fill.pushed();
        let shown = if corrupt {
            head.wrapping_add(100)
        } else {
            head
        };
        QueueMem::<u32>::head(self.fill.mem()).store(shown, std::sync::atomic::Ordering::Release);
    }

    /// The application takes every descriptor published.
    fn drain(&mut self) {
        self.ring.publish();
        while let Ok(Some(d)) = self.app.pop() {
            self.rx.push(if d.nbufs == 0 {
                Rx::Inline(d.chan, d.data[..d.len as usize].to_vec())
            } else {
                Rx::Buffers(
                    d.chan,
                    d.len,
                    (0..usize::from(d.nbufs)).map(|i| d.offset(i)).collect(),
                )
            });
        }
    }
}

impl NativeHost for Counting {
    fn buffer_size(&self) -> u32 {
        self.size
    }
    fn area_len(&self) -> u32 {
        AREA
    }
    fn read_area(&self, off: u32, dst: &mut [i8]) {
        self.copies.set(self.copies.get() + 1);
        self.area
            .with_bytes(off as usize, dst.len(), |b| unet::natives::u8_to_i8(dst, b));
    }
    fn write_area(&mut self, off: u32, src: &[i8]) {
        self.copies.set(self.copies.get() + 1);
        self.area
            .with_bytes_mut(off as usize, src.len(), |b| unet::natives::i8_to_u8(b, src));
    }
    fn pop_free(&mut self) -> Option<u32> {
        self.pops += 1;
        self.take_free();
        let b = self.take_buffer();
        self.lend_free();
        b
    }
    fn push_rx(&mut self, chan: u16, len: u32, body: RxBody<'_>) -> Result<(), HostError> {
        self.pushes += 1;
        self.take_run();
        let pushed = self.ring.push_unpublished_with(|q, i| match body {
            RxBody::Inline(b) => q.write_rx_inline(i, chan, b.len(), |d| d.copy_from_slice(b)),
            RxBody::Buffers(o) => q.write_rx_buffers(i, chan, len, o),
        });
        self.lend_run();
        match pushed {
            Ok(true) => Ok(()),
            _ => Err(HostError::RxQueueFull),
        }
    }
    fn transmit(&mut self, chan: u16, payload: &[i8]) -> Result<(), HostError> {
        if !self.open.contains(&chan) {
            return Err(HostError::NoSuchChannel(chan));
        }
        self.sent
            .push((chan, payload.iter().map(|&b| b as u8).collect()));
        Ok(())
    }
    fn max_message(&self) -> u32 {
        self.max_message
    }
    fn charge(&mut self, bytes: usize) -> Result<(), HostError> {
        let w = &mut self.words;
        w.work += 1 + (bytes as u64 >> 12);
        if w.work < w.bound {
            return Ok(());
        }
        // The clock reading: the budget is checked here only, as the
        // engine checks its time budget.
        w.bound = w.work + CHECK_EVERY;
        self.checks += 1;
        if w.work > self.budget {
            return Err(HostError::OverBudget {
                what: "work units",
                limit: self.budget,
            });
        }
        Ok(())
    }
    fn try_charge(&mut self, bytes: usize) -> bool {
        let work = self.words.work + 1 + (bytes as u64 >> 12);
        if work >= self.words.bound {
            return false;
        }
        self.words.work = work;
        true
    }
    fn words(&mut self) -> Option<&mut HostWords> {
        self.lend.then_some(&mut self.words)
    }
}

/// Escape (`applets/unet/Escape.java`) on `engine` for `host`.
fn load(engine: Engine) -> Applet {
    let mut a = Applet::load_with_engine(
        applets::ESCAPE,
        &bind::<Counting>(),
        Limits::default(),
        engine,
    )
    .expect("Escape loads");
    assert_eq!(a.engine(), engine);
    a.set_static_array("RxBuf", &[0; 64]).unwrap();
    a
}

/// An argument from the edges and the middle of every range the natives check.
fn arg(rng: &mut StdRng) -> i32 {
    const EDGES: &[i32] = &[
        0,
        1,
        2,
        3,
        -1,
        7,
        8,
        9,
        15,
        16,
        17,
        24,
        31,
        32,
        33,
        40,
        48,
        55,
        56,
        57,
        255,
        256,
        257,
        127,
        128,
        129,
        511,
        512,
        513,
        1000,
        1001,
        4095,
        4096,
        4097,
        7168,
        7169,
        65535,
        65536,
        i32::MAX,
        i32::MIN,
        0x7fff_fe00,
    ];
    if rng.random_bool(0.6) {
        EDGES[rng.random_range(0..EDGES.len())]
    } else {
        rng.random_range(-64..5000)
    }
}

/// What one call left behind on one engine: its outcome (the value, or
/// the trap's kind and message) and the applet's statics.
#[derive(Debug, PartialEq)]
struct After {
    outcome: Result<Option<i32>, String>,
    c: i32,
    buf: Option<Vec<i8>>,
    got: Option<usize>,
}

fn call(a: &mut Applet, host: &mut Counting, tx: bool) -> After {
    let m = a.method(if tx { "doTx" } else { "doRx" }).unwrap();
    let args: &[i32] = if tx { &[0, 1, 0] } else { &[0, 1] };
    // The free queue's run stays lent from call to call (the native's
    // pop lends it): what the inline pops took is taken back after each,
    // as `Io::end` does.
    host.lend_run();
    let r = a.call(&m, args, Some(&mut *host));
    host.take_run();
    host.take_free();
    let outcome = match r {
        Ok(o) => Ok(o.value),
        Err(InvokeError::Trap(t)) => Err(format!("{:?} at {} bci {}", t.kind, t.method, t.bci)),
        Err(e) => Err(format!("{e}")),
    };
    let buf = match a.static_array("Buf") {
        Some(Object::Bytes(v)) => Some(v.clone()),
        _ => None,
    };
    let got = a.static_array("Got").and_then(Object::array_len);
    After {
        outcome,
        c: a.static_int("c").unwrap(),
        buf,
        got,
    }
}

/// One stream: `calls` random attempts on both engines, compared after
/// each (every mode of Escape). Returns how many went through a native
/// that did not trap.
fn stream(seed: u64, calls: usize) -> usize {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut hj = Counting::new(&mut rng.clone());
    let mut hi = Counting::new(&mut rng);
    if rng.random_bool(0.1) {
        // A buffer size an `int` cannot hold: getFreeBufferLength traps.
        // No free queue's bounds lent either: the inline pop and dmaRxd
        // check against them as against the buffer size and the area's
        // length (`unet::natives::RX_ONE_BUFFER`), which an endpoint's
        // layout keeps whole buffers; this one's area is no buffer.
        for h in [&mut hi, &mut hj] {
            h.size = 0x8000_0000;
            h.words.ints[0] = h.size as i32;
            h.words.queue = QueueWords::default();
        }
    }
    let mut ai = load(Engine::Interpreter);
    let mut aj = load(Engine::Jit);
    let mut ok = 0;
    for step in 0..calls {
        let mode = rng.random_range(1..=25);
        let (a, b, c) = (arg(&mut rng), arg(&mut rng), arg(&mut rng));
        let buf_len = match rng.random_range(0..6) {
            0 => Some(0),
            1 => Some(rng.random_range(1..64)),
            2 => Some(1024),
            _ => None,
        };
        let offsets = match rng.random_range(0..4) {
            0 => Some(
                (0..if rng.random_bool(0.8) { 14 } else { 13 })
                    .map(|_| {
                        if rng.random_bool(0.7) {
                            (rng.random_range(0..BUFFERS + 2) * BUF) as i32
                        } else {
                            arg(&mut rng)
                        }
                    })
                    .collect::<Vec<i32>>(),
            ),
            _ => None,
        };
        if rng.random_bool(0.15) {
            // The application gives entries back: buffers, and now and
            // then entries that are not (unaligned, past the area, past
            // what an `int` holds), or a corrupt producer index.
            let entries: Vec<u32> = (0..rng.random_range(0..4))
                .map(|_| match rng.random_range(0..8) {
                    0 => 1,
                    1 => AREA,
                    2 => AREA + BUF,
                    3 => 0x8000_0000,
                    4 => u32::MAX,
                    _ => rng.random_range(0..BUFFERS) * BUF,
                })
                .collect();
            let corrupt = rng.random_bool(0.05);
            for h in [&mut hi, &mut hj] {
                h.give(&entries, corrupt);
            }
        } else {
            for h in [&mut hi, &mut hj] {
                h.give(&[], false);
            }
        }
        if rng.random_bool(0.05) {
            // The endpoint keeps a buffer aside (as the engine does when a
            // message could not be delivered): given before the queue's,
            // so none of the queue's stays lent (as `Io::push_rx` lends).
            for h in [&mut hi, &mut hj] {
                if h.spare.is_empty() {
                    h.keep_aside(BUF);
                } else {
                    h.spare.clear();
                }
            }
        }
        for app in [&mut ai, &mut aj] {
            app.set_static_int("mode", mode).unwrap();
            app.set_static_int("a", a).unwrap();
            app.set_static_int("b", b).unwrap();
            app.set_static_int("c", c).unwrap();
            if let Some(n) = buf_len {
                let bytes: Vec<u8> = (0..n).map(|i| (i * 13 + 1) as u8).collect();
                app.set_static_array("Buf", &bytes).unwrap();
            }
            if let Some(o) = &offsets {
                app.set_static_int_array("Offsets", o).unwrap();
            }
        }
        let tx = rng.random_bool(0.5);
        let i = call(&mut ai, &mut hi, tx);
        let j = call(&mut aj, &mut hj, tx);
        if rng.random_bool(0.2) {
            // The application takes the descriptors: the endpoint's view
            // of its index is stale until a push finds the queue full.
            hi.drain();
            hj.drain();
        }
        let what =
            format!("seed {seed} step {step}: mode {mode}, ({a}, {b}, {c}), buf {buf_len:?}");
        assert_eq!(i, j, "{what}: interpreter and JIT differ");
        assert_eq!(hi, hj, "{what}: the endpoints differ");
        if i.outcome == Ok(Some(0)) && mode != 15 {
            ok += 1;
        }
    }
    assert!(hi.checks > 0, "seed {seed}: the clock was never read");
    hi.drain();
    hj.drain();
    assert_eq!(hi, hj, "seed {seed}: the endpoints differ at the end");
    ok
}

#[test]
fn fast_forms_give_the_ordinary_natives_results_effects_and_traps() {
    if !jive::jit::available() {
        return;
    }
    let mut ok = 0;
    for seed in 0..40 {
        ok += stream(seed, 300);
    }
    // The streams exercise the successful paths too, not only the traps.
    assert!(ok > 1000, "only {ok} calls succeeded");
}

#[test]
fn a_budget_spent_mid_stream_traps_at_the_same_call_on_both_engines() {
    if !jive::jit::available() {
        return;
    }
    let (first_trap, _, _) = first_budget_trap(
        7,
        |_| {},
        |app, _| app.set_static_int("mode", 13).unwrap(),
        "getFreeBufferLength()I: the applet exceeded its budget of 50 work units",
    );
    // 50 units allowed; the first clock reading past them is the 56th
    // call's (one every 8 units), which traps.
    assert_eq!(first_trap, Some(55));
}

/// 100 invocations of `doRx` on both engines, each host with a budget of
/// 50 work units and its words lent (then `lend` applied), `set` applied
/// to each applet before each invocation, compared after each: the step
/// of the first trap, whose message contains `msg`, and the two hosts.
fn first_budget_trap(
    seed: u64,
    lend: impl Fn(&mut Counting),
    set: impl Fn(&mut Applet, usize),
    msg: &str,
) -> (Option<usize>, Counting, Counting) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut hj = Counting::new(&mut rng.clone());
    let mut hi = Counting::new(&mut rng);
    for h in [&mut hi, &mut hj] {
        h.budget = 50;
        h.lend = true;
        lend(h);
    }
    let mut ai = load(Engine::Interpreter);
    let mut aj = load(Engine::Jit);
    let mut first_trap = None;
    for step in 0..100 {
        for app in [&mut ai, &mut aj] {
            set(app, step);
        }
        let i = call(&mut ai, &mut hi, false);
        let j = call(&mut aj, &mut hj, false);
        assert_eq!(i, j, "step {step}");
        assert_eq!(hi, hj, "step {step}");
        if let Err(trap) = &i.outcome
            && first_trap.is_none()
        {
            first_trap = Some(step);
            assert!(trap.contains(msg), "{trap}");
        }
    }
    (first_trap, hi, hj)
}

#[test]
fn a_buffer_size_an_int_cannot_hold_traps_on_both_engines() {
    if !jive::jit::available() {
        return;
    }
    let mut rng = StdRng::seed_from_u64(11);
    let mut hj = Counting::new(&mut rng.clone());
    let mut hi = Counting::new(&mut rng);
    for h in [&mut hi, &mut hj] {
        h.lend = true;
        h.size = 0x8000_0000;
        h.words.ints[0] = h.size as i32;
    }
    let mut ai = load(Engine::Interpreter);
    let mut aj = load(Engine::Jit);
    for app in [&mut ai, &mut aj] {
        app.set_static_int("mode", 13).unwrap();
    }
    let i = call(&mut ai, &mut hi, false);
    let j = call(&mut aj, &mut hj, false);
    assert_eq!(i, j);
    assert_eq!(hi, hj);
    let trap = i.outcome.unwrap_err();
    assert!(
        trap.contains("the endpoint's buffer size 2147483648 does not fit an int"),
        "{trap}"
    );
}

/// A host that lends its words and a receive queue of `depth` slots.
fn lending(seed: u64, depth: u32) -> (Counting, Counting) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut hs = [Counting::new(&mut rng.clone()), Counting::new(&mut rng)];
    for h in &mut hs {
        let seg = Arc::new(Segment::create("fast-natives", 4096).unwrap());
        let q = RxQueue::new(seg.clone(), QueueLayout::new(0, depth)).unwrap();
        (h.rx_seg, h.rx_depth) = (seg, depth);
        h.words.ring = RingWords::new(Arc::new(q.rx_slots())).unwrap();
        h.ring = Producer::new(q.clone());
        h.app = Consumer::new(q);
        h.lend = true;
        h.budget = u64::MAX;
    }
    let [hi, hj] = hs;
    (hi, hj)
}

#[test]
fn the_inline_push_writes_every_length_and_declines_past_the_checks() {
    if !jive::jit::available() {
        return;
    }
    let (mut hi, mut hj) = lending(3, 8);
    let mut ai = load(Engine::Interpreter);
    let mut aj = load(Engine::Jit);
    let mut pushed = 0;
    // Lengths 0..=56 (inline) and past them, payload arrays shorter than,
    // as long as and longer than the length, channel tags at and past
    // their edges; the application drains every few pushes, so that the
    // queue is full (and the endpoint's view of it stale) now and then.
    let tags = [0, 1, 65535, 65536, -1, i32::MIN];
    let mut step = 0;
    for len in -1..=60 {
        for buf in [len.max(0) - 1, len.max(0), 60] {
            for &tag in &tags {
                step += 1;
                for app in [&mut ai, &mut aj] {
                    app.set_static_int("mode", 5).unwrap();
                    app.set_static_int("a", tag).unwrap();
                    app.set_static_int("b", len).unwrap();
                    if buf >= 0 {
                        let bytes: Vec<u8> = (0..buf).map(|i| (i * 31 + 7) as u8).collect();
                        app.set_static_array("Buf", &bytes).unwrap();
                    }
                }
                let i = call(&mut ai, &mut hi, false);
                let j = call(&mut aj, &mut hj, false);
                let what = format!("len {len}, buf {buf}, tag {tag}");
                assert_eq!(i, j, "{what}: interpreter and JIT differ");
                assert_eq!(hi, hj, "{what}: the endpoints differ");
                if i.outcome == Ok(Some(0)) {
                    pushed += 1;
                }
                if step % 7 == 0 {
                    hi.drain();
                    hj.drain();
                }
            }
        }
    }
    hi.drain();
    hj.drain();
    assert_eq!(hi, hj);
    assert!(pushed > 100, "only {pushed} pushes");
    assert!(
        hi.rx
            .iter()
            .any(|d| matches!(d, Rx::Inline(_, b) if b.len() == 56))
    );
}

/// The inline push's slot is the application's as soon as the push
/// returns, with no take-back by the host: sealed (its header word, `len |
/// chan << 32 | 1 << 56`, stored last), with its bytes, and byte for byte
/// the slot the native's push writes. The application takes each message
/// by its seal alone (as `Endpoint::recv_ref` does) before the host takes
/// the run back, so that its consumer index runs ahead of the host's
/// count for a while; the take-back then counts every slot and the host's
/// next read of that index finds it valid.
#[test]
fn the_inline_push_seals_its_slot_and_needs_no_take_back() {
    if !jive::jit::available() {
        return;
    }
    let (mut hi, mut hj) = lending(11, 4);
    // No clock reading in this test, so that every push is the inline
    // form's on the JIT (a reading is the native's).
    hi.words.bound = u64::MAX;
    hj.words.bound = u64::MAX;
    let mut ai = load(Engine::Interpreter);
    let mut aj = load(Engine::Jit);
    let lens = [0usize, 1, 7, 8, 9, 15, 16, 17, 31, 40, 47, 55, 56];
    for (k, &len) in lens.iter().enumerate() {
        let bytes: Vec<u8> = (0..len).map(|i| (i * 17 + k * 3 + 1) as u8).collect();
        let tag = 300 + k as u16;
        for app in [&mut ai, &mut aj] {
            app.set_static_int("mode", 5).unwrap();
            app.set_static_int("a", i32::from(tag)).unwrap();
            app.set_static_int("b", len as i32).unwrap();
            app.set_static_array("Buf", &bytes).unwrap();
        }
        for (a, h, engine) in [(&mut ai, &mut hi, "interpreter"), (&mut aj, &mut hj, "JIT")] {
            let what = format!("{engine}, len {len}");
            // The producer's view of the consumer's index read afresh, so
            // that the whole queue is lent.
            assert_eq!(h.ring.space(), Ok(4), "{what}");
            h.lend_run();
            let m = a.method("doRx").unwrap();
            let r = a.call(&m, &[0, 1], Some(&mut *h));
            assert_eq!(r.map(|o| o.value).ok(), Some(Some(0)), "{what}");
            // The interpreter's native push counted its slot (`push_rx`);
            // the inline push's is taken from the run and not yet taken
            // back.
            let counted = if engine == "JIT" { k } else { k + 1 };
            assert_eq!(h.ring.pushed(), counted as u32, "{what}");
            assert_eq!(h.words.ring.room(), 3, "{what}");
            // The application, before any take-back.
            let q = h.app.mem().clone();
            let (i, fixed) = h
                .app
                .take_sealed_with(|q, slot| q.rx_fixed(slot))
                .unwrap_or_else(|| panic!("{what}: sealed by the push"));
            assert_eq!(fixed, (len as u32, tag, 0), "{what}");
            q.with_rx_inline(i, len, |b| assert_eq!(b, &bytes[..], "{what}"));
            h.app.advance();
        }
        assert_eq!(hi.rx_slot_bytes(), hj.rx_slot_bytes(), "len {len}");
        hi.take_run();
        hj.take_run();
        for h in [&mut hi, &mut hj] {
            assert_eq!(h.ring.pushed(), k as u32 + 1);
            assert_eq!(h.ring.consumed(), Ok(k as u32 + 1), "a valid index");
        }
    }
}

/// The JIT's range fact (a local bounded by a dominating `if (n <= 56)`,
/// which lets the inline push leave out its own test of 56) is
/// forgotten where the local changes (a store: Escape's mode 19; an
/// `iinc`: mode 20) and where a path without the bound joins (mode 21),
/// and never made where the branch's target is the next op (mode 22):
/// lengths past 56 made after the test, or arriving by the other path,
/// are refused on the JIT as on the interpreter, and nothing is pushed
/// past a slot.
#[test]
fn the_inline_push_tests_a_length_changed_or_joined_after_its_bound() {
    if !jive::jit::available() {
        return;
    }
    let (mut hi, mut hj) = lending(7, 8);
    let mut ai = load(Engine::Interpreter);
    let mut aj = load(Engine::Jit);
    let bytes: Vec<u8> = (0..200).map(|i| (i * 13 + 5) as u8).collect();
    for app in [&mut ai, &mut aj] {
        app.set_static_array("Buf", &bytes).unwrap();
        app.set_static_int("a", 3).unwrap();
    }
    let (mut pushed, mut refused) = (0, 0);
    for mode in [19, 20, 21, 22] {
        for len in 44..=64 {
            for c in [0, 1, 4, 8, 100] {
                // Room in the endpoint's view of the queue, so that the
                // inline push (not the native, after a view that reads
                // full) meets the length: the queue drained, and one push
                // (by the native where the view was stale) reads it again.
                hi.drain();
                hj.drain();
                for app in [&mut ai, &mut aj] {
                    app.set_static_int("mode", 5).unwrap();
                    app.set_static_int("b", 8).unwrap();
                }
                let i = call(&mut ai, &mut hi, false);
                let j = call(&mut aj, &mut hj, false);
                assert_eq!((&i, &hi), (&j, &hj), "mode {mode}: the push before");
                assert_eq!(i.outcome, Ok(Some(0)), "mode {mode}: the push before");
                for app in [&mut ai, &mut aj] {
                    app.set_static_int("mode", mode).unwrap();
                    app.set_static_int("b", len).unwrap();
                    app.set_static_int("c", c).unwrap();
                }
                let i = call(&mut ai, &mut hi, false);
                let j = call(&mut aj, &mut hj, false);
                let what = format!("mode {mode}, len {len}, c {c}");
                assert_eq!(i, j, "{what}: interpreter and JIT differ");
                assert_eq!(hi, hj, "{what}: the endpoints differ");
                match i.outcome {
                    Ok(Some(0)) => pushed += 1,
                    Ok(_) => {}
                    Err(_) => refused += 1,
                }
            }
        }
    }
    hi.drain();
    hj.drain();
    assert_eq!(hi, hj);
    assert!(pushed > 50, "only {pushed} pushes");
    assert!(refused > 50, "only {refused} refusals");
}

#[test]
fn the_inline_push_declines_a_null_array_and_a_full_queue() {
    if !jive::jit::available() {
        return;
    }
    let (mut hi, mut hj) = lending(5, 2);
    let mut ai = load(Engine::Interpreter);
    let mut aj = load(Engine::Jit);
    // A push, a null array while a slot is free, a push, a push that
    // finds both slots taken, and one after the application took them.
    for (step, mode) in [5, 11, 5, 5, 5].into_iter().enumerate() {
        for app in [&mut ai, &mut aj] {
            app.set_static_int("mode", mode).unwrap();
            app.set_static_int("a", 1).unwrap();
            // A null array with a length of 0: only its type says no.
            app.set_static_int("b", if mode == 11 { 0 } else { 8 })
                .unwrap();
        }
        let i = call(&mut ai, &mut hi, false);
        let j = call(&mut aj, &mut hj, false);
        assert_eq!(i, j, "step {step}");
        assert_eq!(hi, hj, "step {step}");
        match step {
            3 => assert!(
                format!("{:?}", i.outcome).contains("the endpoint's receive queue is full"),
                "{:?}",
                i.outcome
            ),
            1 => assert!(
                format!("{:?}", i.outcome).contains("payload is null"),
                "{:?}",
                i.outcome
            ),
            _ => {}
        }
        if step == 3 {
            // The application takes both: the endpoint's view is stale
            // until the next push reads the consumer's index.
            hi.drain();
            hj.drain();
        }
    }
    hi.drain();
    hj.drain();
    assert_eq!(hi.rx.len(), 3);
    assert_eq!(hi, hj);
}

/// dmaRxd's inline form (`unet::natives::RX_ONE_BUFFER`): a message of 1
/// to `BUF` bytes in one valid buffer, on a channel of at most 0xffff,
/// with an offsets list of 14, is pushed in place with no native call;
/// every other call (a length of 0, past one buffer or negative, a tag
/// past 0xffff or negative, a list of 13 or `null`, a first offset
/// unaligned, past the area or negative) goes to the native, which pushes
/// or reports as the interpreter's does; so does a push that finds the
/// run full. Both engines leave the same slots, byte for byte.
#[test]
fn the_inline_dmarxd_pushes_one_buffer_and_leaves_the_rest_to_the_native() {
    if !jive::jit::available() {
        return;
    }
    let (mut hi, mut hj) = lending(13, 4);
    for h in [&mut hi, &mut hj] {
        h.lend_free_queue("fast-natives-dmarxd");
        // No clock reading: each call's path is the form's choice alone.
        h.words.bound = u64::MAX;
    }
    let mut ai = load(Engine::Interpreter);
    let mut aj = load(Engine::Jit);
    let b = BUF as i32;
    let lens = [
        -1,
        0,
        1,
        2,
        57,
        b - 1,
        b,
        b + 1,
        2 * b,
        14 * b,
        14 * b + 1,
        i32::MIN,
    ];
    let firsts = [0, b, AREA as i32 - b, AREA as i32, 1, b / 2, -b, i32::MIN];
    let tags = [0, 7, 65535, 65536, -1];
    let (mut inline, mut native, mut refused) = (0, 0, 0);
    let mut step = 0;
    for &len in &lens {
        for &first in &firsts {
            for count in [14, 13, 0] {
                for &tag in &tags {
                    step += 1;
                    let offsets: Vec<i32> = (0..count)
                        .map(|k| if k == 0 { first } else { k % 4 * b })
                        .collect();
                    for app in [&mut ai, &mut aj] {
                        // Mode 10 passes `null`.
                        let mode = if count == 0 { 10 } else { 4 };
                        app.set_static_int("mode", mode).unwrap();
                        app.set_static_int("a", tag).unwrap();
                        app.set_static_int("b", len).unwrap();
                        if count > 0 {
                            app.set_static_int_array("Offsets", &offsets).unwrap();
                        }
                    }
                    let pushes = hj.pushes;
                    let i = call(&mut ai, &mut hi, false);
                    let j = call(&mut aj, &mut hj, false);
                    let what = format!("len {len}, first {first}, count {count}, tag {tag}");
                    assert_eq!(i, j, "{what}: interpreter and JIT differ");
                    assert_eq!(hi, hj, "{what}: the endpoints differ");
                    let one = (1..=b).contains(&len)
                        && (0..AREA as i32).contains(&first)
                        && first % b == 0
                        && count == 14
                        && (0..=0xffff).contains(&tag);
                    match (i.outcome, hj.pushes == pushes) {
                        (Ok(_), true) => {
                            assert!(one, "{what}: pushed in place past a check");
                            inline += 1;
                        }
                        (Ok(_), false) => native += 1,
                        (Err(_), _) => refused += 1,
                    }
                    if step % 3 == 0 {
                        hi.drain();
                        hj.drain();
                    }
                }
            }
        }
    }
    hi.drain();
    hj.drain();
    assert_eq!(hi, hj);
    assert!(
        hi.rx
            .iter()
            .any(|d| matches!(d, Rx::Buffers(7, l, o) if *l == BUF && o.len() == 1))
    );
    // In place where the form applies and the run has room; the native
    // for a longer message, a stale full view, and every refusal.
    assert!(inline > 20, "only {inline} pushed in place");
    assert!(native > 20, "only {native} pushed by the native");
    assert!(refused > 500, "only {refused} refused");
}

#[test]
fn the_inline_pop_takes_valid_entries_and_leaves_the_rest_to_the_native() {
    if !jive::jit::available() {
        return;
    }
    let (mut hi, mut hj) = lending(9, 8);
    for h in [&mut hi, &mut hj] {
        h.lend_free_queue("fast-natives-free");
        // No clock reading: each call's path is the queue's choice alone.
        h.words.bound = u64::MAX;
    }
    let mut ai = load(Engine::Interpreter);
    let mut aj = load(Engine::Jit);
    for app in [&mut ai, &mut aj] {
        app.set_static_int("mode", 12).unwrap();
    }
    // (entries the application gives before the call, a corrupt producer
    // index, a spare buffer, what getFreeBuffer returns, invalid entries
    // and corrupt indices counted so far, whether the JIT's call stayed
    // inline).
    type Step = (&'static [u32], bool, bool, i32, u64, u64, bool);
    let steps: &[Step] = &[
        // Empty.
        (&[], false, false, -1, 0, 0, false),
        // One entry: the call that reads the producer's index takes it.
        (&[0], false, false, 0, 0, 0, false),
        // Two seen by the first call, so the second is lent: taken inline.
        (&[BUF, 2 * BUF], false, false, BUF as i32, 0, 0, false),
        (&[], false, false, 2 * BUF as i32, 0, 0, true),
        // Unaligned, then past the area, past an `int`, all ones: lent,
        // declined inline, skipped and counted by the native.
        (
            &[3 * BUF, 1, 4 * BUF],
            false,
            false,
            3 * BUF as i32,
            0,
            0,
            false,
        ),
        (&[], false, false, 4 * BUF as i32, 1, 0, false),
        (
            &[5 * BUF, AREA, 0x8000_0000, u32::MAX],
            false,
            false,
            5 * BUF as i32,
            1,
            0,
            false,
        ),
        (&[], false, false, -1, 4, 0, false),
        // A spare buffer comes before the queue's (lent nothing).
        (
            &[6 * BUF, 7 * BUF],
            false,
            false,
            6 * BUF as i32,
            4,
            0,
            false,
        ),
        (&[], false, true, BUF as i32, 4, 0, false),
        (&[], false, false, 7 * BUF as i32, 4, 0, true),
        // A corrupt producer index: the seen entry is still taken (as the
        // native takes it, without reading the index), then counted.
        (&[0, BUF], false, false, 0, 4, 0, false),
        (&[], true, false, BUF as i32, 4, 0, true),
        (&[], true, false, -1, 4, 1, false),
        (&[2 * BUF], false, false, 2 * BUF as i32, 4, 1, false),
        // An aligned entry past the area (and an `int`) alone, lent:
        // declined inline, skipped and counted by the native.
        (
            &[3 * BUF, 0x8000_0000],
            false,
            false,
            3 * BUF as i32,
            4,
            1,
            false,
        ),
        (&[], false, false, -1, 5, 1, false),
    ];
    for (step, &(entries, corrupt, spare, want, invalid, corrupted, inline)) in
        steps.iter().enumerate()
    {
        let native_calls = hj.pops;
        for h in [&mut hi, &mut hj] {
            h.give(entries, corrupt);
            if spare {
                h.keep_aside(BUF);
            }
            // Lent as the native's pop lends it, so that this call's one
            // pop sees what the application gave.
            h.lend_free();
        }
        let i = call(&mut ai, &mut hi, false);
        let j = call(&mut aj, &mut hj, false);
        assert_eq!(i, j, "step {step}: interpreter and JIT differ");
        assert_eq!(hi, hj, "step {step}: the endpoints differ");
        assert_eq!(i.outcome, Ok(Some(0)), "step {step}");
        assert_eq!(i.c, want, "step {step}");
        assert_eq!(hj.pops == native_calls, inline, "step {step}: inline");
        assert_eq!(
            (hi.free_invalid, hi.corrupt),
            (invalid, corrupted),
            "step {step}"
        );
    }
    // Every entry given was taken or skipped, on both.
    assert_eq!(hi.free.lend(), hj.free.lend());
    assert_eq!(hi.free.lend().1, 0);
}

/// Several pops in one invocation (Escape's mode 14): the first, with
/// nothing lent, is the native's, which lends the rest of the entries it
/// saw; the inline ones that follow cross the queue's end and wrap to its
/// first entry, and one past them is the native's again. What stays lent
/// after a call is the next call's, inline.
#[test]
fn the_inline_pops_of_one_invocation_wrap_at_the_queue_end() {
    if !jive::jit::available() {
        return;
    }
    let (mut hi, mut hj) = lending(11, 8);
    for h in [&mut hi, &mut hj] {
        h.lend_free_queue("fast-natives-wrap");
        h.words.bound = u64::MAX;
    }
    let mut ai = load(Engine::Interpreter);
    let mut aj = load(Engine::Jit);
    let hash = |v: &[u32]| {
        v.iter()
            .fold(0i32, |c, &x| c.wrapping_mul(31).wrapping_add(x as i32))
    };
    // (entries given before the call, pops, what the pops return, and
    // how many of them were the native's on the JIT).
    type Step = (&'static [u32], i32, &'static [u32], u64);
    let steps: &[Step] = &[
        // One entry, taken: the consumer index is 1, and nothing is
        // lent (the native saw no more).
        (&[BUF], 1, &[BUF], 1),
        // Four from index 1: the native takes the one at slot 1 and lends
        // slots 2, 3 and (wrapping) 0, which the inline pops take.
        (
            &[2 * BUF, 3 * BUF, 4 * BUF, 5 * BUF],
            4,
            &[2 * BUF, 3 * BUF, 4 * BUF, 5 * BUF],
            1,
        ),
        // Again from index 5 (slot 1), and one more than there is: the
        // run spent, the native's pop finds none.
        (
            &[6 * BUF, 7 * BUF, BUF, 2 * BUF],
            5,
            &[6 * BUF, 7 * BUF, BUF, 2 * BUF, u32::MAX],
            2,
        ),
        // Three more: the native takes one and lends two, which stay
        // lent after the call, so that the next calls' pops are inline.
        (&[3 * BUF, 4 * BUF, 5 * BUF], 1, &[3 * BUF], 1),
        (&[], 1, &[4 * BUF], 0),
        (&[], 1, &[5 * BUF], 0),
        (&[], 1, &[u32::MAX], 1),
    ];
    for (step, &(entries, pops, want, natives)) in steps.iter().enumerate() {
        let native_calls = hj.pops;
        for (h, app) in [(&mut hi, &mut ai), (&mut hj, &mut aj)] {
            h.give(entries, false);
            app.set_static_int("mode", 14).unwrap();
            app.set_static_int("a", pops).unwrap();
        }
        let i = call(&mut ai, &mut hi, false);
        let j = call(&mut aj, &mut hj, false);
        assert_eq!(i, j, "step {step}: interpreter and JIT differ");
        assert_eq!(hi, hj, "step {step}: the endpoints differ");
        assert_eq!(i.outcome, Ok(Some(0)), "step {step}");
        assert_eq!(i.c, hash(want), "step {step}");
        assert_eq!(hj.pops - native_calls, natives, "step {step}: native pops");
    }
    assert_eq!(hi.free.lend(), hj.free.lend());
    assert_eq!(hi.free.lend().1, 0, "every entry given was taken");
}

impl Counting {
    /// Lends this host's buffer area to the inline copies.
    fn lend_area(&mut self) {
        let a = self.area.area_bytes(0, AREA).unwrap();
        self.words.area = AreaWords::new(Arc::new(a)).unwrap();
    }
}

/// The two engines side by side for the copy tests: Escape on the
/// interpreter and on the JIT, each with an endpoint whose buffer area is
/// lent to the inline copies and whose budget is never read against the
/// clock (each call's path is its arguments' choice).
struct CopyPair {
    apps: [Applet; 2],
    hosts: [Counting; 2],
}

impl CopyPair {
    fn new(seed: u64) -> CopyPair {
        let (mut hi, mut hj) = lending(seed, 8);
        for h in [&mut hi, &mut hj] {
            h.lend_area();
            h.words.bound = u64::MAX;
        }
        CopyPair {
            apps: [load(Engine::Interpreter), load(Engine::Jit)],
            hosts: [hi, hj],
        }
    }

    /// One call of Escape's `mode` with `(a, b, c)` and `Buf` holding
    /// `bytes`, on both engines, which must agree on its outcome, the
    /// statics and the endpoint: the interpreter's outcome, and whether
    /// the JIT's call left the native uncalled.
    fn call(&mut self, mode: i32, [a, b, c]: [i32; 3], bytes: &[u8], what: &str) -> (After, bool) {
        for app in &mut self.apps {
            app.set_static_int("mode", mode).unwrap();
            app.set_static_int("a", a).unwrap();
            app.set_static_int("b", b).unwrap();
            app.set_static_int("c", c).unwrap();
            app.set_static_array("Buf", bytes).unwrap();
        }
        let [ai, aj] = &mut self.apps;
        let [hi, hj] = &mut self.hosts;
        let native = hj.copies.get();
        let i = call(ai, hi, false);
        let j = call(aj, hj, false);
        assert_eq!(i, j, "{what}: interpreter and JIT differ");
        assert_eq!(hi, hj, "{what}: the endpoints differ");
        (i, hj.copies.get() == native)
    }
}

/// `doHtoLDMA` (Escape's mode 1, 7 with a null array) and `doLtoHDMA`
/// (2, 8) with array offsets, area offsets and lengths at and past every
/// bound the natives check, on arrays shorter and longer than the copies:
/// the JIT's inline copy moves what the native moves where every check
/// passes (no native copy made; its own loop up to `COPY_INLINE_MAX`
/// bytes, a `memcpy` past it), and leaves every other call to the native,
/// which traps with its own message at its own check (nothing moved on
/// either engine).
#[test]
fn the_inline_copies_move_what_the_natives_move_and_decline_past_every_check() {
    if !jive::jit::available() {
        return;
    }
    let mut pair = CopyPair::new(13);
    let max = jive::COPY_INLINE_MAX as i32;
    let area = AREA as i32;
    let aoffs = [i32::MIN, -1, 0, 1, 8, 39, 72, 199, 200];
    let offs = [
        i32::MIN,
        -1,
        0,
        1,
        7,
        area - max - 1,
        area - max,
        area - 41,
        area - 40,
        area - 1,
        area,
        i32::MAX,
    ];
    let lens = [
        i32::MIN,
        -1,
        0,
        1,
        7,
        8,
        9,
        40,
        max - 1,
        max,
        max + 1,
        4096,
        i32::MAX,
    ];
    let (mut inline, mut long, mut trapped) = (0, 0, 0);
    for mode in [1, 2, 7, 8] {
        for buf in [0usize, 7, 40, 200, 4100] {
            let bytes: Vec<u8> = (0..buf).map(|i| (i * 29 + 5) as u8).collect();
            for &aoff in &aoffs {
                for &off in &offs {
                    for &len in &lens {
                        let what = format!("mode {mode}, buf {buf}, ({aoff}, {off}, {len})");
                        let (i, stayed) = pair.call(mode, [aoff, off, len], &bytes, &what);
                        let fits = mode <= 2
                            && len >= 0
                            && aoff >= 0
                            && i64::from(aoff) + i64::from(len) <= buf as i64
                            && off >= 0
                            && i64::from(off) + i64::from(len) <= i64::from(area);
                        match &i.outcome {
                            Ok(_) => {
                                assert!(fits, "{what}: copied past a check");
                                assert!(stayed, "{what}: the JIT called the native");
                                inline += 1;
                                if len > max {
                                    long += 1;
                                }
                            }
                            Err(t) => {
                                assert!(!fits, "{what}: trapped: {t}");
                                assert!(stayed, "{what}: a trapping call copied");
                                trapped += 1;
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(inline > 300, "only {inline} inline copies");
    assert!(long > 10, "only {long} copies past the inline loop");
    assert!(trapped > 1000, "only {trapped} traps");
}

/// `doHtoLDMA` (Escape's mode 1) and `doLtoHDMA` (2) of every length up
/// to one past `COPY_INLINE_MAX`, at array and area offsets 0 and odd
/// ones: the JIT's inline copy (16 bytes a round from the end and the
/// first 16 again, 8 and 8 from 8 bytes, byte by byte under 8; a
/// `memcpy` past the limit) moves exactly the bytes the interpreter's
/// native moves, and none around them, at every length's way through it.
/// The test above takes a few lengths with every check around them.
#[test]
fn the_inline_copies_move_every_length_exactly() {
    if !jive::jit::available() {
        return;
    }
    let mut pair = CopyPair::new(19);
    let max = jive::COPY_INLINE_MAX as i32;
    let mut step = 0u32;
    for len in 0..=max + 1 {
        for (aoff, off) in [(0, 0), (3, 5), (1, 64)] {
            for mode in [1, 2] {
                step += 1;
                // Bytes that differ from call to call, so that a byte
                // left unmoved shows.
                let bytes: Vec<u8> = (0..aoff + max + 2)
                    .map(|i| (i as u32 * 29 + step * 7) as u8)
                    .collect();
                let what = format!("mode {mode}, ({aoff}, {off}, {len})");
                let (i, stayed) = pair.call(mode, [aoff, off, len], &bytes, &what);
                assert!(i.outcome.is_ok(), "{what}: {:?}", i.outcome);
                assert!(stayed, "{what}: the JIT called the native");
            }
        }
    }
}

/// A budget spent by copies: the inline copy counts its unit as the
/// native does, and declines the call that would reach the clock reading,
/// so that both engines trap at the same call with the native's message.
#[test]
fn a_budget_spent_by_copies_traps_at_the_same_call_on_both_engines() {
    if !jive::jit::available() {
        return;
    }
    let (first_trap, hi, hj) = first_budget_trap(
        17,
        Counting::lend_area,
        |app, step| {
            // Copies of 40 bytes (one unit) and of 4096 (two), so that
            // the units counted inline are the native's.
            let long = step % 3 == 2;
            let step = step as i32;
            app.set_static_int("mode", 1 + step % 2).unwrap();
            app.set_static_int("a", 3).unwrap();
            app.set_static_int("b", if long { 0 } else { 64 * step })
                .unwrap();
            app.set_static_int("c", if long { 4096 } else { 40 })
                .unwrap();
            app.set_static_array("Buf", &[9; 4100]).unwrap();
        },
        "DMA([BIII)V: the applet exceeded its budget of 50 work units",
    );
    // 50 units allowed, 4 per 3 calls; the first clock reading past them
    // (one every 8 units, at 56) is the 42nd call's, which traps.
    assert_eq!(first_trap, Some(41));
    // The JIT's copies before the clock readings were inline.
    assert!(hj.copies.get() < hi.copies.get() / 2);
}

// ---------------------------------------------------------------------------
// `txPush` in the engine: the frame its `Io` writes (`Framer::push_message`),
// through the JIT's fast form, with every check it makes.

/// Endpoint `a` of a loopback engine runs Hostile in mode 4 (each message
/// it sends makes its `doTx` call `txPush` `count` times); `b` is its peer
/// on channel `ab` (no checksum) and `ab_sum` (a UDP checksum), `c` on
/// `ac`, the channel the messages that start `doTx` are sent on.
struct Pusher {
    engine: unet::Engine,
    a: unet::Endpoint,
    b: Option<unet::Endpoint>,
    c: unet::Endpoint,
    ab: u16,
    ab_sum: u16,
    ac: u16,
}

/// What one message's `doTx` did: A's frames, traps and overruns counted
/// meanwhile, and the payloads B received.
#[derive(Debug, PartialEq, Eq)]
struct Pushed {
    frames: u64,
    traps: u64,
    overruns: u64,
    at_b: Vec<Vec<u8>>,
}

fn pusher(budgets: unet::engine::Budgets) -> Pusher {
    let net = unet::transport::LoopNet::new();
    let engine = unet::Engine::with_budgets(
        Box::new(net.attach("10.0.0.1:7000".parse().unwrap()).unwrap()),
        budgets,
    );
    let mut a = engine
        .create_endpoint(unet::Config::default(), Some(applets::HOSTILE))
        .unwrap();
    let mut b = engine
        .create_endpoint(unet::Config::default(), None)
        .unwrap();
    let mut c = engine
        .create_endpoint(unet::Config::default(), None)
        .unwrap();
    let ab = a.open_channel(engine.local(), b.id()).unwrap();
    let ab_sum = a
        .open_channel_with(
            engine.local(),
            b.id(),
            unet::engine::ChannelOptions { checksum: true },
        )
        .unwrap();
    let ac = a.open_channel(engine.local(), c.id()).unwrap();
    b.open_channel(engine.local(), a.id()).unwrap();
    c.open_channel(engine.local(), a.id()).unwrap();
    engine
        .with_applet(a.id(), |ap| ap.set_static_int("mode", 4).unwrap())
        .unwrap();
    Pusher {
        engine,
        a,
        b: Some(b),
        c,
        ab,
        ab_sum,
        ac,
    }
}

impl Pusher {
    /// Sends one message on `ac` with Hostile's statics set to these
    /// (`buf` its `Buf`), and reports what its `doTx` did.
    fn push(&mut self, buf: &[u8], off: i32, chan: i32, len: i32, count: i32, nul: bool) -> Pushed {
        self.engine
            .with_applet(self.a.id(), |ap| {
                ap.set_static_array("Buf", buf).unwrap();
                for (name, v) in [
                    ("off", off),
                    ("chan", chan),
                    ("len", len),
                    ("count", count),
                    ("nul", i32::from(nul)),
                ] {
                    ap.set_static_int(name, v).unwrap();
                }
            })
            .unwrap();
        let before = self.a.counts();
        self.a.send(self.ac, b"go").unwrap();
        while !self.a.flush(1000) {}
        let after = self.a.counts();
        let mut at_b = Vec::new();
        if let Some(b) = self.b.as_mut() {
            while let Some(m) = b.recv() {
                at_b.push(m.to_vec());
            }
        }
        while self.c.recv().is_some() {}
        Pushed {
            frames: after.tx_frames - before.tx_frames,
            traps: after.applet_traps - before.applet_traps,
            overruns: after.applet_overruns - before.applet_overruns,
            at_b,
        }
    }
}

/// The bytes `0, 1, 2, ...` (mod 251), `n` of them.
fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i % 251) as u8).collect()
}

/// What a `doTx` whose pushes all trapped at the first did: the message
/// that started it sent nothing of the applet's, one trap, no frame to B.
fn trapped(p: &Pushed) -> bool {
    p.traps == 1 && p.at_b.is_empty()
}

/// `txPush` in the engine sends exactly the bytes asked for, on open
/// channels with and without a checksum, at every length up to the largest
/// message (the first push on a fresh outbox, which must grow, included);
/// and traps with nothing sent on every argument a check refuses: a null
/// or short array, offsets and lengths past it, a channel out of range,
/// one not open on this endpoint, one closed, a length past the largest
/// message. Run on the old `frame_parts` path and on `push_message` alike.
#[test]
fn tx_push_in_the_engine_sends_what_it_is_given_and_traps_past_every_check() {
    let mut p = pusher(unet::engine::Budgets::default());
    let max = p.a.max_message() as i32;
    let big = pattern(max as usize + 16);
    // The first push grows the outbox; then every length class.
    for (chan, len) in [
        (p.ab, max),
        (p.ab, 0),
        (p.ab, 1),
        (p.ab, 40),
        (p.ab_sum, 40),
        (p.ab, 1000),
        (p.ab_sum, 1001),
        (p.ab, max - 1),
        (p.ab_sum, max),
    ] {
        for off in [0, 3] {
            let got = p.push(&big, off, i32::from(chan), len, 2, false);
            let want = big[off as usize..(off + len) as usize].to_vec();
            assert_eq!(got.traps, 0, "chan {chan} len {len} off {off}");
            assert_eq!(got.at_b, vec![want.clone(), want], "chan {chan} len {len}");
            assert!(got.frames >= 2, "{got:?}");
        }
    }
    let ab = i32::from(p.ab);
    // Arrays, offsets, lengths.
    let short = pattern(40);
    for (buf, off, len, nul) in [
        (&short[..], 0, 40, true),
        (&short[..], 0, 41, false),
        (&short[..], 1, 40, false),
        (&short[..], -1, 8, false),
        (&short[..], 0, -1, false),
        (&short[..], i32::MAX, 8, false),
        (&short[..], 8, i32::MAX, false),
        (&short[..], 0, i32::MIN, false),
        (&[][..], 0, 1, false),
        (&big[..], 0, max + 1, false),
        (&big[..], 16, max + 1, false),
    ] {
        let got = p.push(buf, off, ab, len, 1, nul);
        assert!(trapped(&got), "off {off} len {len} null {nul}: {got:?}");
    }
    // Channels: out of range, never open here (the next tag), another
    // endpoint's (B's), closed.
    let next = i32::from(p.ac.max(p.ab_sum)) + 1;
    for chan in [-1, 65536, i32::MIN, i32::MAX, 65535, next] {
        let got = p.push(&short, 0, chan, 8, 1, false);
        assert!(trapped(&got), "chan {chan}: {got:?}");
    }
    drop(p.b.take());
    for chan in [p.ab, p.ab_sum] {
        let got = p.push(&short, 0, i32::from(chan), 8, 1, false);
        assert_eq!(
            (got.traps, got.frames),
            (1, 0),
            "closed chan {chan}: {got:?}"
        );
    }
    // The engine still works: the open channel to C takes a push.
    let got = p.push(&short, 0, i32::from(p.ac), 8, 1, false);
    assert_eq!(got.traps, 0, "{got:?}");
}

/// The push budgets, frames and bytes, each run out at exactly the push
/// past it: the invocation traps as an overrun there, and the pushes
/// before it are counted as frames.
#[test]
fn tx_push_in_the_engine_traps_at_the_push_past_each_budget() {
    let budgets = unet::engine::Budgets {
        push_frames: 4,
        push_bytes: 100,
        throttle: 0,
        ..unet::engine::Budgets::default()
    };
    let mut p = pusher(budgets);
    let buf = pattern(100);
    let ab = i32::from(p.ab);
    // Within both: 4 frames of 25 bytes.
    let got = p.push(&buf, 0, ab, 25, 4, false);
    assert_eq!(
        (got.traps, got.overruns, got.at_b.len()),
        (0, 0, 4),
        "{got:?}"
    );
    // A fifth frame: past push_frames.
    let within = p.push(&buf, 0, ab, 1, 4, false);
    let past = p.push(&buf, 0, ab, 1, 5, false);
    assert_eq!((within.traps, within.overruns), (0, 0), "{within:?}");
    assert_eq!((past.traps, past.overruns), (1, 1), "{past:?}");
    assert_eq!(
        past.frames, within.frames,
        "the four pushes before the trap counted"
    );
    // 101 bytes in two frames: past push_bytes at the second.
    let within = p.push(&buf, 0, ab, 50, 2, false);
    let past = p.push(&buf, 0, ab, 51, 2, false);
    assert_eq!((within.traps, within.overruns), (0, 0), "{within:?}");
    assert_eq!((past.traps, past.overruns), (1, 1), "{past:?}");
    assert_eq!(
        past.frames + 1,
        within.frames,
        "the first push before the trap counted"
    );
}

/// The inline push's seal is its last store to the slot: in the JIT's
/// code for Escape, each push's header word (`len | tag << 32 |
/// jive::RING_HEADER_SEALED`) is stored after the copy of its bytes, and
/// nothing stores into the slot after it before the push's code jumps on.
/// The header is built in two forms, both checked: a tag in a register
/// plus the seal's high half (`lea`), then shifted; a constant tag
/// (Escape's modes 23 and 24: 7 and 65535) as one immediate with the seal
/// in it (`mov`). Mode 25's constant 65536, a tag no push takes, gets the
/// native's call alone, no inline form. Read
/// from the machine code, since no test of one thread could see the order
/// of two stores. (x86-64: a plain `mov` is a release store.)
#[test]
fn the_inline_push_stores_its_sealed_header_after_its_bytes() {
    if !jive::jit::available() {
        return;
    }
    let listing = load(Engine::Jit).native_listing().expect("a listing");
    // Each line's mnemonic and operands.
    let insns: Vec<(String, String)> = listing
        .lines()
        .filter(|l| !l.trim_start().starts_with(';'))
        .filter_map(|l| {
            let mut w = l.split_whitespace().skip(2);
            let m = w.next()?.to_string();
            Some((m, w.collect::<Vec<_>>().join(" ")))
        })
        .collect();
    let wide = |r: &str| match r.strip_suffix('d') {
        Some(n) if n.starts_with('r') && n[1..].parse::<u8>().is_ok() => n.to_string(),
        _ => r.replacen('e', "r", 1),
    };
    // The seal's part of the header word's high half, which the push adds
    // to the tag: `lea reg,[tag+1000000h]` for `jive::RING_SEALED` 1.
    let seal_hi = (jive::RING_HEADER_SEALED >> 32) as u32;
    let seal = format!("+{seal_hi:X}h]");
    let seal_byte = 0xffu64 << (8 * jive::RING_SEAL_BYTE);
    // The tag of a header built whole as an immediate: `mov reg,IMMh` with
    // the length's half 0 and the seal's byte sealed.
    let immediate_tag = |ops: &str| {
        let imm = ops.split_once(',')?.1.strip_suffix('h')?;
        let imm = u64::from_str_radix(imm, 16).ok()?;
        (imm as u32 == 0 && imm & seal_byte == jive::RING_HEADER_SEALED)
            .then(|| ((imm >> 32) as u32).wrapping_sub(seal_hi))
    };
    let (mut in_register, mut immediate) = (0, Vec::new());
    for (k, (m, ops)) in insns.iter().enumerate() {
        if m == "lea" && ops.contains(&seal) {
            in_register += 1;
        } else if let Some(tag) = (m == "mov").then(|| immediate_tag(ops)).flatten() {
            immediate.push(tag);
        } else {
            continue;
        }
        // The seal's register, and its store: `mov [slot],reg`.
        let reg = wide(ops.split(',').next().unwrap());
        let (at, slot) = insns[k + 1..]
            .iter()
            .enumerate()
            .find_map(|(j, (m, o))| {
                let (dst, src) = o.split_once(',')?;
                (m == "mov" && src == reg && dst.starts_with('[') && !dst.contains('+'))
                    .then(|| (k + 1 + j, dst.trim_matches(['[', ']']).to_string()))
            })
            .expect("the header's store");
        let to_slot = |o: &str| {
            o.split(',')
                .next()
                .unwrap()
                .starts_with(&format!("[{slot}+"))
        };
        // The bytes before it: the copy's stores into the slot, past its
        // header.
        let before = insns[k.saturating_sub(40)..k]
            .iter()
            .filter(|(m, o)| m.starts_with("mov") && to_slot(o))
            .count();
        assert!(
            before > 0,
            "no copy before the seal at {k}: {:?}",
            &insns[k..=at]
        );
        // Nothing into the slot after it, up to the push's jump on.
        for (m, o) in insns[k..]
            .iter()
            .skip(at - k + 1)
            .take_while(|(m, _)| m != "jmp")
        {
            let into_slot =
                (m.starts_with("mov") && to_slot(o)) || o.starts_with(&format!("[{slot}]"));
            assert!(!into_slot, "a store into the slot after its seal: {m} {o}");
        }
    }
    assert!(
        in_register > 0,
        "no inline push of a tag in a register sealed in Escape's code"
    );
    immediate.sort_unstable();
    assert_eq!(
        immediate,
        [7, 65535],
        "the inline pushes of a constant tag sealed in Escape's code"
    );
}
