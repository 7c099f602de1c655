//! The U-Net/SLE natives and the paper's evaluation applets (§2, §5), run
//! against a mock endpoint: each applet's protocol, and every native's
//! bounds checks with an applet that tries to escape (every attempt traps,
//! names the native and the argument, and leaves the endpoint as it was).
#![cfg(not(loom))]

#[path = "common/mock.rs"]
mod mock;

use std::collections::VecDeque;

use jive::{Applet, InvokeError, Limits, LoadError, Trap, TrapKind};
use mock::{AREA, BUF, BUFFERS, MAX_MESSAGE, Mock, Rx, pattern};
use unet::applets;
use unet::natives::bind;

/// The length of the RxBuf the tests give each applet.
const RXBUF: usize = 16 * 1024;

/// Loads an applet for `mock` (its constructor runs with the mock as host)
/// and gives it an RxBuf of [`RXBUF`] bytes.
fn load(bytes: &[u8], mock: &mut Mock) -> Applet {
    let mut a = Applet::load_with_host(bytes, &bind::<Mock>(), Limits::default(), Some(mock))
        .expect("the applet loads");
    a.set_static_array("RxBuf", &vec![0u8; RXBUF]).unwrap();
    a
}

/// Puts `msg` in RxBuf and runs doRx(msg.len(), chan) for `mock`.
fn rx(a: &mut Applet, mock: &mut Mock, msg: &[u8], chan: i32) -> Result<i32, InvokeError> {
    let mut field = a.static_bytes_field("RxBuf")?;
    let buf = a.static_bytes_mut(&mut field).expect("RxBuf is set");
    for (d, s) in buf.iter_mut().zip(msg) {
        *d = *s as i8;
    }
    let m = a.method("doRx")?;
    let out = a.call(&m, &[msg.len() as i32, chan], Some(mock))?;
    Ok(out.value.expect("doRx returns an int"))
}

/// Runs doTx(len, chan, off) for `mock`.
fn tx(a: &mut Applet, mock: &mut Mock, len: i32, chan: i32, off: i32) -> Result<i32, InvokeError> {
    let m = a.method("doTx")?;
    let out = a.call(&m, &[len, chan, off], Some(mock))?;
    Ok(out.value.expect("doTx returns an int"))
}

/// The message of a native trap, or a panic saying what happened instead.
fn native_trap(r: Result<i32, InvokeError>) -> String {
    match r {
        Err(InvokeError::Trap(Trap {
            kind: TrapKind::Native(msg),
            ..
        })) => msg,
        other => panic!("expected a native trap, got {other:?}"),
    }
}

fn int_array(a: &Applet, name: &str) -> Vec<i32> {
    match a.static_array(name) {
        Some(jive::Object::Ints(v)) => v.clone(),
        other => panic!("{name}: {other:?}"),
    }
}

/// Java's signed bytes as the endpoint's.
fn unsigned(v: &[i8]) -> Vec<u8> {
    v.iter().map(|&b| b as u8).collect()
}

fn byte_array(a: &Applet, name: &str) -> Option<Vec<i8>> {
    match a.static_array(name) {
        Some(jive::Object::Bytes(v)) => Some(v.clone()),
        None => None,
        other => panic!("{name}: {other:?}"),
    }
}

// ---------------------------------------------------------------------------
// Loading.

#[test]
fn constructors_that_ask_for_the_buffer_size_need_the_endpoint() {
    for bytes in [
        applets::STANDARD,
        applets::SIMPLE,
        applets::BURST25,
        applets::BURST25_PER_TX,
        applets::GENERATE,
    ] {
        let e = Applet::load(bytes, &bind::<Mock>(), Limits::default()).unwrap_err();
        let LoadError::Instantiate(Trap {
            kind: TrapKind::Native(msg),
            ..
        }) = e
        else {
            panic!("expected a native trap in the constructor, got {e:?}");
        };
        assert!(
            msg.starts_with("getFreeBufferLength()I: ") && msg.contains("host value"),
            "{msg}"
        );
        let mut mock = Mock::new();
        let a = load(bytes, &mut mock);
        assert_eq!(a.static_int("freebufferlen").unwrap(), BUF as i32);
    }
}

#[test]
fn a_host_of_another_type_is_refused() {
    let mut mock = Mock::new();
    let mut a = load(applets::STANDARD, &mut mock);
    let m = a.method("doRx").unwrap();
    let mut other = 7u32;
    let msg = native_trap(
        a.call(&m, &[10, 1], Some(&mut other))
            .map(|o| o.value.unwrap()),
    );
    assert!(msg.starts_with("dmaRxdPayload([BII)V: "), "{msg}");
    assert!(msg.contains("Mock"), "{msg}");
}

// ---------------------------------------------------------------------------
// StandardUnet.

#[test]
fn standard_delivers_56_bytes_inline() {
    let mut mock = Mock::new();
    let mut a = load(applets::STANDARD, &mut mock);
    let before = mock.clone();
    let msg = pattern(56, 1);
    assert_eq!(rx(&mut a, &mut mock, &msg, 2).unwrap(), 0);
    assert_eq!(
        mock.rx,
        vec![Rx::Inline {
            chan: 2,
            bytes: msg
        }]
    );
    assert_eq!(mock.free, before.free, "no buffer taken");
    assert_eq!(mock.area, before.area, "the area untouched");
}

#[test]
fn standard_delivers_57_bytes_in_one_buffer() {
    let mut mock = Mock::new();
    let mut a = load(applets::STANDARD, &mut mock);
    let msg = pattern(57, 2);
    assert_eq!(rx(&mut a, &mut mock, &msg, 1).unwrap(), 0);
    assert_eq!(
        mock.rx,
        vec![Rx::Buffers {
            chan: 1,
            len: 57,
            offsets: vec![0]
        }]
    );
    assert_eq!(&mock.area[..57], &msg[..]);
    assert_eq!(
        &mock.area[57..],
        &Mock::new().area[57..],
        "nothing past the message"
    );
    assert_eq!(mock.free.len(), BUFFERS as usize - 1);
}

#[test]
fn standard_spreads_4096_bytes_over_eight_buffers_in_free_queue_order() {
    let mut mock = Mock::new();
    // The application gave its buffers in a scrambled order.
    mock.free = [7, 2, 5, 0, 3, 6, 1, 4].iter().map(|i| i * BUF).collect();
    let mut a = load(applets::STANDARD, &mut mock);
    let msg = pattern(4096, 3);
    assert_eq!(rx(&mut a, &mut mock, &msg, 1).unwrap(), 0);
    let expected: Vec<u32> = [7, 2, 5, 0, 3, 6, 1, 4].iter().map(|i| i * BUF).collect();
    assert_eq!(
        mock.rx,
        vec![Rx::Buffers {
            chan: 1,
            len: 4096,
            offsets: expected.clone()
        }]
    );
    for (i, &o) in expected.iter().enumerate() {
        assert_eq!(
            &mock.area[o as usize..(o + BUF) as usize],
            &msg[i * BUF as usize..(i + 1) * BUF as usize],
            "chunk {i} in the buffer at {o}"
        );
    }
    assert!(mock.free.is_empty());
}

#[test]
fn standard_fills_a_last_partial_buffer_and_leaves_its_tail() {
    let mut mock = Mock::new();
    let mut a = load(applets::STANDARD, &mut mock);
    let msg = pattern(1000, 4);
    assert_eq!(rx(&mut a, &mut mock, &msg, 1).unwrap(), 0);
    let rx0 = mock.rx[0].clone();
    assert_eq!(
        rx0,
        Rx::Buffers {
            chan: 1,
            len: 1000,
            offsets: vec![0, 512]
        }
    );
    assert_eq!(mock.message(&rx0), msg);
    assert_eq!(&mock.area[1000..1024], &Mock::new().area[1000..1024]);
}

#[test]
fn standard_drops_when_the_free_queue_runs_dry_and_keeps_the_buffers_it_took() {
    let mut mock = Mock::new();
    mock.free = VecDeque::from([3 * BUF]);
    let mut a = load(applets::STANDARD, &mut mock);
    let msg = pattern(1000, 5);
    assert_eq!(
        rx(&mut a, &mut mock, &msg, 1).unwrap(),
        -1,
        "two buffers needed, one free"
    );
    assert!(mock.rx.is_empty());
    assert!(mock.free.is_empty());
    assert_eq!(a.static_int("held").unwrap(), 1);
    // A small message still goes inline meanwhile.
    assert_eq!(rx(&mut a, &mut mock, &[9; 8], 1).unwrap(), 0);
    // The application gives more buffers: the kept one is used first.
    mock.free.extend([5 * BUF, 6 * BUF]);
    assert_eq!(rx(&mut a, &mut mock, &msg, 1).unwrap(), 0);
    let last = mock.rx.last().unwrap().clone();
    assert_eq!(
        last,
        Rx::Buffers {
            chan: 1,
            len: 1000,
            offsets: vec![3 * BUF, 5 * BUF]
        }
    );
    assert_eq!(mock.message(&last), msg);
    assert_eq!(
        mock.free,
        VecDeque::from([6 * BUF]),
        "none lost, none extra"
    );
    assert_eq!(a.static_int("held").unwrap(), 0);
}

#[test]
fn standard_uses_held_buffers_oldest_first_and_keeps_the_rest() {
    let mut mock = Mock::new();
    mock.free = VecDeque::from([0, BUF, 2 * BUF]);
    let mut a = load(applets::STANDARD, &mut mock);
    // Four buffers needed, three free: dropped, all three held.
    assert_eq!(rx(&mut a, &mut mock, &pattern(2000, 20), 1).unwrap(), -1);
    assert_eq!(a.static_int("held").unwrap(), 3);
    // Two needed: the two oldest held go; the third stays held.
    let two = pattern(600, 21);
    assert_eq!(rx(&mut a, &mut mock, &two, 1).unwrap(), 0);
    assert_eq!(a.static_int("held").unwrap(), 1);
    // One needed: the last held one, before the free queue.
    mock.free.push_back(5 * BUF);
    let one = pattern(100, 22);
    assert_eq!(rx(&mut a, &mut mock, &one, 1).unwrap(), 0);
    let offsets: Vec<Vec<u32>> = mock
        .rx
        .iter()
        .map(|d| match d {
            Rx::Buffers { offsets, .. } => offsets.clone(),
            Rx::Inline { .. } => panic!("inline"),
        })
        .collect();
    assert_eq!(offsets, vec![vec![0, BUF], vec![2 * BUF]]);
    assert_eq!(mock.message(&mock.rx[0]), two);
    assert_eq!(mock.message(&mock.rx[1]), one);
    assert_eq!(mock.free, VecDeque::from([5 * BUF]));
    assert_eq!(a.static_int("held").unwrap(), 0);
}

#[test]
fn standard_keeps_the_buffers_when_the_receive_queue_is_full() {
    let mut mock = Mock::new();
    let mut a = load(applets::STANDARD, &mut mock);
    mock.rx_capacity = 0;
    let msg = pattern(600, 6);
    let trap = native_trap(rx(&mut a, &mut mock, &msg, 1));
    assert_eq!(trap, "dmaRxd([III)V: the endpoint's receive queue is full");
    assert_eq!(a.static_int("held").unwrap(), 2);
    mock.rx_capacity = 1;
    assert_eq!(rx(&mut a, &mut mock, &msg, 1).unwrap(), 0);
    assert_eq!(
        mock.rx,
        vec![Rx::Buffers {
            chan: 1,
            len: 600,
            offsets: vec![0, 512]
        }]
    );
    assert_eq!(mock.free.len(), BUFFERS as usize - 2);
}

#[test]
fn standard_drops_a_message_longer_than_fourteen_buffers_without_taking_any() {
    let mut mock = Mock::new();
    let mut a = load(applets::STANDARD, &mut mock);
    let before = mock.clone();
    let msg = pattern(14 * BUF as usize + 1, 7);
    assert_eq!(rx(&mut a, &mut mock, &msg, 1).unwrap(), -1);
    assert_eq!(mock, before);
}

#[test]
fn standard_transmits_the_applications_buffer() {
    let mut mock = Mock::new();
    let mut a = load(applets::STANDARD, &mut mock);
    let msg = pattern(700, 8);
    mock.area[1024..1724].copy_from_slice(&msg);
    assert_eq!(tx(&mut a, &mut mock, 700, 2, 1024).unwrap(), 0);
    assert_eq!(mock.sent, vec![(2, msg)]);
    assert_eq!(mock.area_reads.get(), 1);
}

#[test]
fn standard_transmit_on_a_closed_channel_traps_and_sends_nothing() {
    let mut mock = Mock::new();
    let mut a = load(applets::STANDARD, &mut mock);
    let trap = native_trap(tx(&mut a, &mut mock, 10, 3, 0));
    assert_eq!(
        trap,
        "txPush([BIII)V: channel 3 is not an open channel of this endpoint"
    );
    assert!(mock.sent.is_empty());
}

// ---------------------------------------------------------------------------
// RawUnet (Figure 2).

#[test]
fn simple_delivers_inline_and_in_one_buffer() {
    let mut mock = Mock::new();
    let mut a = load(applets::SIMPLE, &mut mock);
    let small = pattern(56, 9);
    let one = pattern(512, 10);
    assert_eq!(rx(&mut a, &mut mock, &small, 1).unwrap(), 0);
    assert_eq!(rx(&mut a, &mut mock, &one, 2).unwrap(), 0);
    assert_eq!(
        mock.rx,
        vec![
            Rx::Inline {
                chan: 1,
                bytes: small
            },
            Rx::Buffers {
                chan: 2,
                len: 512,
                offsets: vec![0]
            }
        ]
    );
    assert_eq!(&mock.area[..512], &one[..]);
    let msg = pattern(300, 11);
    mock.area[2048..2348].copy_from_slice(&msg);
    assert_eq!(tx(&mut a, &mut mock, 300, 1, 2048).unwrap(), 0);
    assert_eq!(mock.sent, vec![(1, msg)]);
}

#[test]
fn simple_cannot_write_a_long_message_past_the_area() {
    // Figure 2 assumes one buffer per message; in the last buffer, a longer
    // message runs into the end of the area, where doLtoHDMA stops it.
    let mut mock = Mock::new();
    mock.free = VecDeque::from([AREA - BUF]);
    let mut a = load(applets::SIMPLE, &mut mock);
    let area = mock.area.clone();
    let trap = native_trap(rx(&mut a, &mut mock, &pattern(600, 12), 1));
    assert_eq!(
        trap,
        "doLtoHDMA([BIII)V: useroff 3584 + len 600 exceeds the buffer area (4096 bytes)"
    );
    assert_eq!(mock.area, area);
    assert!(mock.rx.is_empty());
}

// ---------------------------------------------------------------------------
// PingPong.

#[test]
fn pingpong_echoes_without_delivering() {
    let mut mock = Mock::new();
    let mut a = load(applets::PING_PONG, &mut mock);
    let msg = pattern(1000, 13);
    assert_eq!(rx(&mut a, &mut mock, &msg, 2).unwrap(), 0);
    assert_eq!(mock.sent, vec![(2, msg)]);
    assert!(mock.rx.is_empty());
    assert_eq!(a.static_int("rounds").unwrap(), 1);
}

#[test]
fn pingpong_between_two_applets_delivers_once_after_limit_round_trips() {
    const ROUNDS: i32 = 5;
    let (mut ma, mut mb) = (Mock::new(), Mock::new());
    let mut a = load(applets::PING_PONG, &mut ma);
    let mut b = load(applets::PING_PONG, &mut mb);
    a.set_static_int("limit", ROUNDS).unwrap();
    let msg = pattern(100, 14);
    ma.area[..100].copy_from_slice(&msg);
    assert_eq!(tx(&mut a, &mut ma, 100, 1, 0).unwrap(), 0);
    let mut hops = 0;
    while ma.rx.is_empty() {
        hops += 1;
        assert!(hops <= 100, "the exchange does not end");
        let (_, ping) = ma.sent.pop().expect("a sent something");
        assert_eq!(ping, msg, "the message travels unchanged");
        assert_eq!(rx(&mut b, &mut mb, &ping, 1).unwrap(), 0);
        let (_, pong) = mb.sent.pop().expect("b echoed");
        assert_eq!(rx(&mut a, &mut ma, &pong, 1).unwrap(), 0);
    }
    assert_eq!(hops, ROUNDS);
    assert_eq!(
        ma.rx,
        vec![Rx::Inline {
            chan: 1,
            bytes: ROUNDS.to_be_bytes().to_vec()
        }]
    );
    assert!(ma.sent.is_empty(), "no echo after the last round");
    assert!(mb.rx.is_empty(), "the echoing side delivers nothing");
    assert_eq!(b.static_int("rounds").unwrap(), ROUNDS);
}

// ---------------------------------------------------------------------------
// Burst25.

fn data(msg: &[u8]) -> Vec<u8> {
    let mut v = msg.to_vec();
    v.push(0);
    v
}

#[test]
fn burst25_sends_25_then_queues_until_the_receiver_acknowledges() {
    let (mut ms, mut mr) = (Mock::new(), Mock::new());
    let mut s = load(applets::BURST25, &mut ms);
    let mut r = load(applets::BURST25, &mut mr);
    // 30 requests, each from its own 100-byte slot of the area.
    let msgs: Vec<Vec<u8>> = (0..30).map(|i| pattern(100, i as u8)).collect();
    for (i, m) in msgs.iter().enumerate() {
        ms.area[i * 100..i * 100 + 100].copy_from_slice(m);
        assert_eq!(tx(&mut s, &mut ms, 100, 1, i as i32 * 100).unwrap(), 0);
    }
    assert_eq!(ms.sent.len(), 25, "one burst");
    assert_eq!(int_array(&s, "tokens")[1], 0);
    assert_eq!(int_array(&s, "qcount")[1], 5);
    for (i, (chan, m)) in ms.sent.iter().enumerate() {
        assert_eq!((*chan, m), (1, &data(&msgs[i])), "message {i}");
    }
    // The receiver delivers each without the trailer and acks the 25th. Its
    // application reads each message and gives the buffer back at once.
    let mut delivered = Vec::new();
    for (i, (_, m)) in ms.sent.drain(..).enumerate() {
        assert_eq!(rx(&mut r, &mut mr, &m, 1).unwrap(), 0);
        let acks = if i < 24 { 0 } else { 1 };
        assert_eq!(mr.sent.len(), acks, "after message {i}");
        let d = mr.rx.pop().expect("delivered");
        delivered.push(mr.message(&d));
        if let Rx::Buffers { offsets, .. } = d {
            mr.free.extend(offsets);
        }
    }
    assert_eq!(delivered, msgs[..25]);
    assert_eq!(mr.sent, vec![(1, vec![0, 0, 0, 25, 1])]);
    // The ack returns 25 tokens: the 5 queued requests go, in order.
    let (_, ack) = mr.sent.pop().unwrap();
    assert_eq!(rx(&mut s, &mut ms, &ack, 1).unwrap(), 0);
    assert!(ms.rx.is_empty(), "acks are not delivered");
    let resent: Vec<Vec<u8>> = ms.sent.iter().map(|(_, m)| m.clone()).collect();
    let expected: Vec<Vec<u8>> = msgs[25..].iter().map(|m| data(m)).collect();
    assert_eq!(resent, expected);
    assert_eq!(int_array(&s, "tokens")[1], 20);
    assert_eq!(int_array(&s, "qcount")[1], 0);
    // With tokens left, a new request goes at once.
    assert_eq!(tx(&mut s, &mut ms, 10, 1, 0).unwrap(), 0);
    assert_eq!(ms.sent.len(), 6);
    assert_eq!(int_array(&s, "tokens")[1], 19);
}

#[test]
fn burst25_keeps_tokens_per_channel() {
    let mut ms = Mock::new();
    let mut s = load(applets::BURST25, &mut ms);
    for _ in 0..25 {
        tx(&mut s, &mut ms, 8, 1, 0).unwrap();
    }
    assert_eq!(tx(&mut s, &mut ms, 8, 2, 0).unwrap(), 0);
    assert_eq!(ms.sent.len(), 26, "channel 2 has its own 25 tokens");
    assert_eq!(&int_array(&s, "tokens")[..3], &[25, 0, 24]);
}

#[test]
fn burst25_drops_a_request_when_the_channel_queue_is_full() {
    let mut ms = Mock::new();
    let mut s = load(applets::BURST25, &mut ms);
    for i in 0..25 + 32 {
        assert_eq!(tx(&mut s, &mut ms, 8, 1, 0).unwrap(), 0, "request {i}");
    }
    assert_eq!(tx(&mut s, &mut ms, 8, 1, 0).unwrap(), -1);
    assert_eq!(int_array(&s, "qcount")[1], 32);
    assert_eq!(ms.sent.len(), 25);
    assert_eq!(
        tx(&mut s, &mut ms, 8, 8, 0).unwrap(),
        -1,
        "channel 8 is not supported"
    );
}

#[test]
fn burst25_counts_dropped_data_so_the_tokens_come_back() {
    let mut mr = Mock::new();
    mr.free.clear();
    let mut r = load(applets::BURST25, &mut mr);
    let big = data(&pattern(200, 15));
    for _ in 0..25 {
        assert_eq!(rx(&mut r, &mut mr, &big, 2).unwrap(), -1, "no free buffer");
    }
    assert!(mr.rx.is_empty());
    assert_eq!(mr.sent, vec![(2, vec![0, 0, 0, 25, 1])]);
}

#[test]
fn burst25_drops_malformed_acks_and_unknown_types() {
    let mut ms = Mock::new();
    let mut s = load(applets::BURST25, &mut ms);
    let before = int_array(&s, "tokens");
    assert_eq!(
        rx(&mut s, &mut ms, &[0, 0, 0, 0, 1], 1).unwrap(),
        -1,
        "count 0"
    );
    assert_eq!(
        rx(&mut s, &mut ms, &[0x80, 0, 0, 0, 1], 1).unwrap(),
        -1,
        "negative count"
    );
    assert_eq!(
        rx(&mut s, &mut ms, &[0, 0, 25, 1], 1).unwrap(),
        -1,
        "short ack"
    );
    assert_eq!(rx(&mut s, &mut ms, &[1, 2, 3, 7], 1).unwrap(), -1, "type 7");
    assert_eq!(rx(&mut s, &mut ms, &[], 1).unwrap(), -1, "empty");
    assert_eq!(int_array(&s, "tokens"), before);
    assert!(ms.rx.is_empty() && ms.sent.is_empty());
}

// ---------------------------------------------------------------------------
// Burst25PerTx and Generate.

#[test]
fn burst25_per_tx_transmits_each_request_25_times_from_one_copy() {
    let mut mock = Mock::new();
    let mut a = load(applets::BURST25_PER_TX, &mut mock);
    let msg = pattern(1500, 16);
    mock.area[512..2012].copy_from_slice(&msg);
    assert_eq!(tx(&mut a, &mut mock, 1500, 2, 512).unwrap(), 0);
    assert_eq!(mock.sent, vec![(2, msg); 25]);
    assert_eq!(mock.area_reads.get(), 1, "one copy out of the area");
    let small = pattern(20, 17);
    assert_eq!(rx(&mut a, &mut mock, &small, 1).unwrap(), 0);
    assert_eq!(
        mock.rx,
        vec![Rx::Inline {
            chan: 1,
            bytes: small
        }]
    );
}

#[test]
fn generate_transmits_its_own_data_without_reading_the_area() {
    let mut mock = Mock::new();
    let mut a = load(applets::GENERATE, &mut mock);
    assert_eq!(tx(&mut a, &mut mock, 1000, 1, 0).unwrap(), 0);
    assert_eq!(tx(&mut a, &mut mock, 0, 2, 4096).unwrap(), 0);
    let expected: Vec<u8> = (0..1000).map(|i| i as u8).collect();
    assert_eq!(mock.sent, vec![(1, expected), (2, vec![])]);
    assert_eq!(mock.area_reads.get(), 0);
    assert_eq!(mock.area, Mock::new().area);
    let trap = native_trap(tx(&mut a, &mut mock, MAX_MESSAGE as i32 + 1, 1, 0));
    assert_eq!(
        trap,
        "txPush([BIII)V: len 9001 exceeds the endpoint's maximum message size (9000 bytes)"
    );
    let msg = pattern(3000, 18);
    assert_eq!(rx(&mut a, &mut mock, &msg, 1).unwrap(), 0);
    let last = mock.rx.last().unwrap().clone();
    assert_eq!(mock.message(&last), msg);
}

// ---------------------------------------------------------------------------
// Escape: every native's bounds checks.

/// One escape attempt: the mode and arguments of `Escape.java`, the arrays
/// it uses (None: the constructor's 256-byte Buf and 14-word Offsets), and
/// the exact trap message.
struct Attempt {
    mode: i32,
    args: [i32; 3],
    buf: Option<usize>,
    offsets: Option<Vec<i32>>,
    expect: String,
}

/// An [`Attempt`] with the constructor's arrays; `args` are a, b, c (missing ones 0).
fn go<const N: usize>(mode: i32, args: [i32; N], expect: impl Into<String>) -> Attempt {
    let mut padded = [0; 3];
    padded[..N].copy_from_slice(&args);
    Attempt {
        mode,
        args: padded,
        buf: None,
        offsets: None,
        expect: expect.into(),
    }
}

fn attempts() -> Vec<Attempt> {
    const H: i32 = 1; // doHtoLDMA
    const L: i32 = 2; // doLtoHDMA
    const TX: i32 = 3;
    const RXD: i32 = 4;
    const PAY: i32 = 5;
    const NEW: i32 = 6;
    let big = |mut a: Attempt, n: usize| {
        a.buf = Some(n);
        a
    };
    let offs = |mut a: Attempt, o: Vec<i32>| {
        a.offsets = Some(o);
        a
    };
    let mut v = Vec::new();
    for (mode, name, arr, off) in [
        (H, "doHtoLDMA([BIII)V", "txarray", "txoff"),
        (L, "doLtoHDMA([BIII)V", "rxarray", "rxoff"),
    ] {
        let msg = |s: &str| format!("{name}: {s}");
        v.extend([
            go(mode, [0, -4096, 64], msg("useroff -4096 is negative")),
            go(mode, [0, -1, 1], msg("useroff -1 is negative")),
            go(
                mode,
                [0, 4096, 1],
                msg("useroff 4096 + len 1 exceeds the buffer area (4096 bytes)"),
            ),
            go(
                mode,
                [0, 4000, 200],
                msg("useroff 4000 + len 200 exceeds the buffer area (4096 bytes)"),
            ),
            big(
                go(
                    mode,
                    [0, 0x7fff_ff00, 0x200],
                    msg("useroff 2147483392 + len 512 exceeds the buffer area (4096 bytes)"),
                ),
                1024,
            ),
            go(
                mode,
                [0, i32::MAX, 1],
                msg("useroff 2147483647 + len 1 exceeds the buffer area (4096 bytes)"),
            ),
            go(mode, [0, 0, -1], msg("len -1 is negative")),
            go(mode, [-1, 0, 16], msg(&format!("{off} -1 is negative"))),
            go(
                mode,
                [250, 0, 16],
                msg(&format!("{off} 250 + len 16 exceeds {arr} (256 bytes)")),
            ),
            go(
                mode,
                [0, 0, 257],
                msg(&format!("{off} 0 + len 257 exceeds {arr} (256 bytes)")),
            ),
            go(
                mode,
                [i32::MAX, 0, i32::MAX],
                msg(&format!(
                    "{off} 2147483647 + len 2147483647 exceeds {arr} (256 bytes)"
                )),
            ),
            go(mode + 6, [0, 0, 1], msg(&format!("{arr} is null"))),
        ]);
    }
    v.extend([
        go(TX, [200, 1, 100], "txPush([BIII)V: txoff 200 + len 100 exceeds txarray (256 bytes)"),
        go(TX, [0, 1, -5], "txPush([BIII)V: len -5 is negative"),
        go(TX, [-8, 1, 8], "txPush([BIII)V: txoff -8 is negative"),
        go(TX, [0, 3, 16], "txPush([BIII)V: channel 3 is not an open channel of this endpoint"),
        go(TX, [0, 0, 16], "txPush([BIII)V: channel 0 is not an open channel of this endpoint"),
        go(TX, [0, 65537, 16], "txPush([BIII)V: chan 65537 is not a channel tag (0..=65535)"),
        go(TX, [0, -1, 16], "txPush([BIII)V: chan -1 is not a channel tag (0..=65535)"),
        big(
            go(TX, [0, 1, 9001], "txPush([BIII)V: len 9001 exceeds the endpoint's maximum message size (9000 bytes)"),
            10_000,
        ),
        go(9, [0, 1, 1], "txPush([BIII)V: txarray is null"),
        offs(go(RXD, [1, 100], "dmaRxd([III)V: offsets has 13 words; a receive descriptor takes exactly 14"), vec![0; 13]),
        offs(go(RXD, [1, 100], "dmaRxd([III)V: offsets has 15 words; a receive descriptor takes exactly 14"), vec![0; 15]),
        offs(go(RXD, [1, 100], "dmaRxd([III)V: offsets has 0 words; a receive descriptor takes exactly 14"), vec![]),
        offs(
            go(RXD, [1, 100], "dmaRxd([III)V: offsets[0] = 100 is not a buffer boundary (a multiple of the buffer size, 512)"),
            with(&[100]),
        ),
        offs(
            go(RXD, [1, 600], "dmaRxd([III)V: offsets[1] = 513 is not a buffer boundary (a multiple of the buffer size, 512)"),
            with(&[0, 513]),
        ),
        offs(
            go(RXD, [1, 100], "dmaRxd([III)V: offsets[0] = 4096: the buffer [4096, 4608) exceeds the buffer area (4096 bytes)"),
            with(&[4096]),
        ),
        offs(
            go(RXD, [1, 1100], "dmaRxd([III)V: offsets[2] = -512 is negative"),
            with(&[0, 512, -512]),
        ),
        offs(
            go(RXD, [1, 100], "dmaRxd([III)V: offsets[0] = 2147483136: the buffer [2147483136, 2147483648) exceeds the buffer area (4096 bytes)"),
            with(&[0x7fff_fe00]),
        ),
        go(RXD, [1, 14 * 512 + 1], "dmaRxd([III)V: len 7169 exceeds 14 buffers of 512 bytes (7168 bytes)"),
        go(RXD, [1, -1], "dmaRxd([III)V: len -1 is negative"),
        go(RXD, [65536, 10], "dmaRxd([III)V: chan 65536 is not a channel tag (0..=65535)"),
        go(10, [1, 10], "dmaRxd([III)V: offsets is null"),
        go(PAY, [1, 57], "dmaRxdPayload([BII)V: len 57 exceeds the inline payload of a receive descriptor (56 bytes)"),
        go(PAY, [1, -1], "dmaRxdPayload([BII)V: len -1 is negative"),
        big(go(PAY, [1, 20], "dmaRxdPayload([BII)V: len 20 exceeds payload (10 bytes)"), 10),
        go(PAY, [-1, 8], "dmaRxdPayload([BII)V: chan -1 is not a channel tag (0..=65535)"),
        go(11, [1, 8], "dmaRxdPayload([BII)V: payload is null"),
        go(NEW, [-1, 0, 0], "newAlignedArray(I)[B: nbytes -1 is negative"),
        go(NEW, [i32::MIN, 0, 0], "newAlignedArray(I)[B: nbytes -2147483648 is negative"),
    ]);
    v
}

/// 14 offsets beginning with `first`, the rest 0.
fn with(first: &[i32]) -> Vec<i32> {
    let mut v = vec![0; 14];
    v[..first.len()].copy_from_slice(first);
    v
}

/// Loads Escape for `mock` with `attempt`'s mode, arguments and arrays.
fn escape(mock: &mut Mock, attempt: &Attempt) -> Applet {
    let mut a = load(applets::ESCAPE, mock);
    a.set_static_int("mode", attempt.mode).unwrap();
    for (name, v) in ["a", "b", "c"].iter().zip(attempt.args) {
        a.set_static_int(name, v).unwrap();
    }
    if let Some(n) = attempt.buf {
        a.set_static_array("Buf", &pattern(n, 0x3c)).unwrap();
    }
    if let Some(o) = &attempt.offsets {
        a.set_static_int_array("Offsets", o).unwrap();
    }
    a
}

#[test]
fn every_escape_attempt_traps_in_its_native_and_moves_nothing() {
    for attempt in attempts() {
        for via_tx in [false, true] {
            let mut mock = Mock::new();
            let mut a = escape(&mut mock, &attempt);
            let before = mock.clone();
            let buf = byte_array(&a, "Buf");
            let r = if via_tx {
                tx(&mut a, &mut mock, 64, 1, 0)
            } else {
                rx(&mut a, &mut mock, &[], 1)
            };
            let msg = native_trap(r);
            assert_eq!(
                msg, attempt.expect,
                "mode {} args {:?}",
                attempt.mode, attempt.args
            );
            assert_eq!(mock, before, "{msg}: the endpoint changed");
            assert_eq!(
                byte_array(&a, "Buf"),
                buf,
                "{msg}: the applet's array changed"
            );
            assert_eq!(byte_array(&a, "Got"), None, "{msg}: an array was made");
        }
    }
}

#[test]
fn a_full_receive_queue_refuses_both_descriptor_kinds() {
    for (mode, args) in [(4, [1, 100]), (5, [1, 8])] {
        let mut mock = Mock::new();
        mock.rx_capacity = 0;
        let mut a = escape(&mut mock, &go(mode, [args[0], args[1], 0], ""));
        let before = mock.clone();
        let msg = native_trap(rx(&mut a, &mut mock, &[], 1));
        assert!(
            msg.ends_with(": the endpoint's receive queue is full"),
            "{msg}"
        );
        assert_eq!(mock, before);
    }
}

#[test]
fn new_aligned_array_stays_within_the_heap_budget() {
    let mut mock = Mock::new();
    let mut a = escape(&mut mock, &go(6, [i32::MAX, 0, 0], ""));
    let msg = native_trap(rx(&mut a, &mut mock, &[], 1));
    assert!(
        msg.starts_with("newAlignedArray(I)[B: nbytes 2147483647: heap limit exceeded"),
        "{msg}"
    );
    let in_use = a.heap().bytes_in_use();
    a.set_static_int("a", Limits::default().heap_bytes as i32)
        .unwrap();
    let msg = native_trap(rx(&mut a, &mut mock, &[], 1));
    assert!(msg.contains("heap limit exceeded"), "{msg}");
    assert_eq!(a.heap().bytes_in_use(), in_use);
    // Within the budget, a zeroed array of that size.
    a.set_static_int("a", 1000).unwrap();
    assert_eq!(rx(&mut a, &mut mock, &[], 1).unwrap(), 0);
    assert_eq!(byte_array(&a, "Got"), Some(vec![0; 1000]));
}

#[test]
fn the_bounds_themselves_are_allowed() {
    // The last byte of the area, the last byte of the array, empty ranges at
    // the ends, 56 bytes inline, 14 full buffers, channel 65535 for a
    // descriptor: all in bounds.
    let cases: Vec<Attempt> = vec![
        go(1, [192, AREA as i32 - 64, 64], ""),
        go(2, [192, AREA as i32 - 64, 64], ""),
        go(1, [256, AREA as i32, 0], ""),
        go(2, [0, 0, 256], ""),
        go(3, [0, 2, 256], ""),
        go(3, [256, 1, 0], ""),
        go(5, [65535, 56], ""),
        go(5, [0, 0], ""),
        go(4, [65535, 0], ""),
    ];
    for attempt in cases {
        let mut mock = Mock::new();
        let mut a = escape(&mut mock, &attempt);
        assert_eq!(
            rx(&mut a, &mut mock, &[], 1).unwrap(),
            0,
            "mode {} args {:?}",
            attempt.mode,
            attempt.args
        );
    }
    // 14 buffers' worth needs an area of 14 buffers: offsets may repeat.
    let mut mock = Mock::new();
    let mut a = escape(
        &mut mock,
        &Attempt {
            offsets: Some(vec![512; 14]),
            ..go(4, [7, 14 * 512, 0], "")
        },
    );
    assert_eq!(rx(&mut a, &mut mock, &[], 1).unwrap(), 0);
    assert_eq!(
        mock.rx,
        vec![Rx::Buffers {
            chan: 7,
            len: 14 * 512,
            offsets: vec![512; 14]
        }]
    );
}

#[test]
fn dma_rxd_checks_only_the_offsets_the_length_needs() {
    let mut mock = Mock::new();
    let mut a = escape(
        &mut mock,
        &Attempt {
            offsets: Some(with(&[1024, -5, 99, 1 << 30])),
            ..go(4, [2, 512, 0], "")
        },
    );
    assert_eq!(rx(&mut a, &mut mock, &[], 1).unwrap(), 0);
    assert_eq!(
        mock.rx,
        vec![Rx::Buffers {
            chan: 2,
            len: 512,
            offsets: vec![1024]
        }]
    );
}

#[test]
fn the_copies_move_exactly_the_named_bytes() {
    // doLtoHDMA: Buf[16..80) to area[1000..1064), nothing else.
    let mut mock = Mock::new();
    let mut a = escape(
        &mut mock,
        &Attempt {
            buf: Some(256),
            ..go(2, [16, 1000, 64], "")
        },
    );
    let buf = unsigned(&byte_array(&a, "Buf").unwrap());
    let mut expected = mock.area.clone();
    expected[1000..1064].copy_from_slice(&buf[16..80]);
    assert_eq!(rx(&mut a, &mut mock, &[], 1).unwrap(), 0);
    assert_eq!(mock.area, expected);
    // doHtoLDMA: area[3000..3100) to Buf[100..200), nothing else.
    let mut mock = Mock::new();
    let mut a = escape(&mut mock, &go(1, [100, 3000, 100], ""));
    let mut expected: Vec<i8> = byte_array(&a, "Buf").unwrap();
    for (d, s) in expected[100..200].iter_mut().zip(&mock.area[3000..3100]) {
        *d = *s as i8;
    }
    assert_eq!(rx(&mut a, &mut mock, &[], 1).unwrap(), 0);
    assert_eq!(byte_array(&a, "Buf").unwrap(), expected);
    // txPush: Buf[5..45) as one message.
    let mut mock = Mock::new();
    let mut a = escape(
        &mut mock,
        &Attempt {
            buf: Some(256),
            ..go(3, [5, 2, 40], "")
        },
    );
    let buf = unsigned(&byte_array(&a, "Buf").unwrap());
    assert_eq!(rx(&mut a, &mut mock, &[], 1).unwrap(), 0);
    assert_eq!(mock.sent, vec![(2, buf[5..45].to_vec())]);
}

#[test]
fn natives_without_the_endpoint_trap() {
    let mut mock = Mock::new();
    let mut a = escape(&mut mock, &go(1, [0, 0, 8], ""));
    let m = a.method("doRx").unwrap();
    let msg = native_trap(a.call(&m, &[0, 1], None).map(|o| o.value.unwrap()));
    assert!(
        msg.starts_with("doHtoLDMA([BIII)V: this native needs a host value"),
        "{msg}"
    );
}

// ---------------------------------------------------------------------------
// The JIT against the interpreter.

/// A small xorshift generator: the same stream on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A value in `lo..=hi`.
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }
}

/// One step of a random stream, applied alike to both engines' endpoints.
#[derive(Debug, Clone)]
enum Step {
    Rx {
        msg: Vec<u8>,
        chan: i32,
    },
    Tx {
        len: i32,
        chan: i32,
        off: i32,
    },
    /// Every buffer back on the free queue (in order), the receive and
    /// transmit records emptied.
    Refill,
    /// The receive queue's capacity, and whether channel 2 is open.
    Squeeze {
        rx_capacity: usize,
        chan2_open: bool,
    },
    /// The static ints by which the test applets (`Escape`, `Hostile`,
    /// `Breakdown`) choose what to do, where the applet has them.
    Fields(Vec<(&'static str, i32)>),
}

fn step(r: &mut Rng) -> Step {
    // A good channel most of the time, a closed or invalid one sometimes.
    let chan = |r: &mut Rng| match r.range(0, 9) {
        0 => r.range(-1, 0) as i32,
        1 => 3,
        k => 1 + (k % 2) as i32,
    };
    match r.range(0, 29) {
        0..=12 => {
            // Mostly inline sizes and sizes of one to a few buffers; now and
            // then one past RxBuf's length or empty.
            let len = match r.range(0, 9) {
                0 => 0,
                1..=4 => r.range(1, 56),
                5..=8 => r.range(57, 3 * i64::from(BUF) + 17),
                _ => r.range(RXBUF as i64 - 2, RXBUF as i64 + 8),
            } as usize;
            Step::Rx {
                msg: pattern(len, r.next() as u8),
                chan: chan(r),
            }
        }
        13..=25 => {
            let (len, off) = if r.range(0, 3) == 0 {
                // Anything, in or out of the area.
                (
                    r.range(-2, i64::from(AREA) + 16),
                    r.range(-8, i64::from(AREA) + 8),
                )
            } else {
                // A message in the area, starting at a buffer.
                let off = r.range(0, i64::from(BUFFERS) - 1) * i64::from(BUF);
                (r.range(0, i64::from(AREA) - off), off)
            };
            Step::Tx {
                len: len as i32,
                chan: chan(r),
                off: off as i32,
            }
        }
        26..=27 => Step::Refill,
        28 => {
            let edge = |r: &mut Rng| match r.range(0, 5) {
                0 => -1,
                1 => i32::MAX,
                2 => r.range(0, 3) as i32,
                _ => r.range(0, i64::from(AREA) + 8) as i32,
            };
            Step::Fields(vec![
                ("mode", r.range(0, 12) as i32),
                ("a", edge(r)),
                ("b", edge(r)),
                ("c", edge(r)),
                ("chan", r.range(0, 3) as i32),
                ("len", edge(r)),
            ])
        }
        _ => Step::Squeeze {
            rx_capacity: [0, 2, 64, 64][r.range(0, 3) as usize],
            chan2_open: r.range(0, 2) != 0,
        },
    }
}

/// Runs `s` on one engine's applet and endpoint: the invocation's result,
/// or `None` for a step that invokes nothing.
fn run_step(
    a: &mut Applet,
    mock: &mut Mock,
    s: &Step,
) -> Option<Result<jive::Outcome, InvokeError>> {
    match s {
        Step::Rx { msg, chan } => {
            if let Ok(p) = a.prepare_lending::<3>("doRx", applets::LENT_DO_RX.param) {
                // The lent form: the message itself, as the engine lends it.
                // SAFETY: `msg` outlives the lend, which ends with the
                // statement; nothing writes it meanwhile.
                let mut lend = unsafe { a.lend(msg.as_ptr(), msg.len()) }.ok()?;
                return Some(lend.call(&p, [0, msg.len() as i32, *chan], Some(mock)));
            }
            let m = a.method("doRx").ok()?;
            let mut field = a.static_bytes_field("RxBuf").ok()?;
            let buf = a.static_bytes_mut(&mut field)?;
            if buf.len() < msg.len() {
                return None;
            }
            for (d, s) in buf.iter_mut().zip(msg) {
                *d = *s as i8;
            }
            Some(a.call(&m, &[msg.len() as i32, *chan], Some(mock)))
        }
        Step::Tx { len, chan, off } => {
            if let Ok(p) = a.prepare_lending::<3>("doTx", applets::LENT_DO_TX.param) {
                // The lent form: the message where it lies in the area, as
                // the engine lends it (a descriptor outside the area never
                // reaches `doTx`), here a copy of it, which the natives'
                // writes into the area do not alias.
                let at = usize::try_from(*off).ok()?;
                let msg = mock
                    .area
                    .get(at..at.checked_add(usize::try_from(*len).ok()?)?)?;
                let msg = msg.to_vec();
                // SAFETY: `msg` outlives the lend, which ends with the
                // statement; nothing writes it meanwhile.
                let mut lend = unsafe { a.lend(msg.as_ptr(), msg.len()) }.ok()?;
                return Some(lend.call(&p, [0, *len, *chan], Some(mock)));
            }
            let m = a.method("doTx").ok()?;
            Some(a.call(&m, &[*len, *chan, *off], Some(mock)))
        }
        Step::Refill => {
            mock.free = (0..BUFFERS).map(|i| i * BUF).collect();
            mock.rx.clear();
            mock.sent.clear();
            None
        }
        Step::Squeeze {
            rx_capacity,
            chan2_open,
        } => {
            mock.rx_capacity = *rx_capacity;
            mock.open = if *chan2_open { vec![1, 2] } else { vec![1] };
            None
        }
        Step::Fields(fields) => {
            for &(f, v) in fields {
                // Applets without the field keep what they have.
                let _ = a.set_static_int(f, v);
            }
            None
        }
    }
}

/// Every applet of [`applets::ALL`], on the JIT and on the interpreter,
/// under the same random stream of receives and transmits (good and bad
/// lengths, channels and offsets; free and receive queues running dry and
/// full; a channel closing and opening): after every step the same result
/// or trap (kind, method, bytecode index), the same fuel, and the same
/// endpoint (area, queues, messages sent, reads of the area).
#[test]
fn every_applet_behaves_the_same_on_the_jit_and_the_interpreter() {
    if !jive::jit::available() {
        eprintln!("skipped: no native backend for this CPU, so no JIT to compare");
        return;
    }
    // Constructors take the default fuel (Generate's builds its messages);
    // invocations a little, so that the applets that loop until they run
    // out (Hostile's floods) stay quick on the interpreter.
    let limits = Limits::default();
    for &(name, bytes) in applets::ALL {
        let mut mocks = [Mock::new(), Mock::new()];
        let mut applets = [jive::Engine::Jit, jive::Engine::Interpreter].map(|engine| {
            let mock = &mut mocks[usize::from(engine == jive::Engine::Interpreter)];
            let lent = [applets::LENT_DO_RX, applets::LENT_DO_TX];
            let mut a = Applet::load_lending(bytes, &bind::<Mock>(), limits, &lent, Some(mock))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            a.set_engine(engine)
                .unwrap_or_else(|e| panic!("{name} on {engine:?}: {e}"));
            if a.prepare_lending::<3>("doRx", 0).is_err() {
                a.set_static_array("RxBuf", &vec![0u8; RXBUF]).unwrap();
            }
            a.set_run_limits(Some(50_000), limits.max_call_depth);
            a
        });
        assert_eq!(applets[0].engine(), jive::Engine::Jit, "{name}");
        assert_eq!(mocks[0], mocks[1], "{name}: after the constructors");
        let mut r = Rng(0x9e37_79b9_7f4a_7c15 ^ name.len() as u64);
        let (mut invoked, mut trapped, mut sent, mut received) = (0, 0, 0, 0);
        for i in 0..1500 {
            let s = step(&mut r);
            let [a0, a1] = &mut applets;
            let [m0, m1] = &mut mocks;
            let jit = run_step(a0, m0, &s);
            let interp = run_step(a1, m1, &s);
            assert_eq!(jit, interp, "{name}, step {i} ({s:?}): results differ");
            assert_eq!(m0, m1, "{name}, step {i} ({s:?}): endpoints differ");
            invoked += usize::from(jit.is_some());
            trapped += usize::from(matches!(jit, Some(Err(_))));
            // The messages sent are only a record: compared, then dropped,
            // so that an applet sending thousands per step stays cheap.
            sent += m0.sent.len();
            m0.sent.clear();
            m1.sent.clear();
            received = received.max(m0.rx.len());
        }
        assert!(invoked > 1000, "{name}: only {invoked} invocations");
        eprintln!(
            "{name}: {invoked} invocations, {trapped} trapped, {sent} messages sent, \
             at most {received} receive descriptors queued"
        );
    }
}
