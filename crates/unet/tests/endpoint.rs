//! Endpoints through the engine on the `loop` transport: what U-Net (§2)
//! promises an application, checked message by message.
#![cfg(not(loom))]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use unet::frame::endpoint_slot;
use unet::layout::{INLINE_MAX, TxDesc, TxStatus};
use unet::transport::LoopNet;
use unet::{Config, Endpoint, Engine};

fn engine() -> Engine {
    let net = LoopNet::new();
    Engine::new(Box::new(
        net.attach("10.0.0.1:7000".parse().unwrap()).unwrap(),
    ))
}

/// Two endpoints of one engine with a channel each way.
fn pair(e: &Engine, config: Config, applet: Option<&[u8]>) -> (Endpoint, Endpoint, u16, u16) {
    let mut a = e.create_endpoint(config, applet).unwrap();
    let mut b = e.create_endpoint(config, applet).unwrap();
    let ab = a.open_channel(e.local(), b.id()).unwrap();
    let ba = b.open_channel(e.local(), a.id()).unwrap();
    (a, b, ab, ba)
}

/// A message whose content says its sequence number and length, with a
/// checksum over both, so that corruption, truncation, duplication and
/// reordering are all visible.
fn message(seq: u64, len: usize) -> Vec<u8> {
    let mut m = vec![0u8; len];
    let mut x = seq.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ len as u64;
    for b in m.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    if len >= 8 {
        m[..8].copy_from_slice(&seq.to_le_bytes());
    }
    m
}

fn seq_of(m: &[u8]) -> Option<u64> {
    let s = u64::from_le_bytes(m.get(..8)?.try_into().ok()?);
    (message(s, m.len()) == m).then_some(s)
}

/// A receive call that finds its queue empty drives the engine in its
/// process (its inbox, the transport) and then takes what that delivered
/// in the same call (its second look at the queue):
/// with no engine thread, the first `recv_ref` or `recv` after a message
/// from another engine was sent returns it, inline or in a buffer.
#[test]
fn a_receive_on_an_empty_queue_polls_the_transport_and_returns_what_came() {
    let net = LoopNet::new();
    let attach = |at: &str| Engine::new(Box::new(net.attach(at.parse().unwrap()).unwrap()));
    let (ea, eb) = (attach("10.0.0.1:7000"), attach("10.0.0.2:7000"));
    let mut a = ea.create_endpoint(Config::default(), None).unwrap();
    let mut b = eb.create_endpoint(Config::default(), None).unwrap();
    let ab = a.open_channel(eb.local(), b.id()).unwrap();
    b.open_channel(ea.local(), a.id()).unwrap();
    assert!(b.recv_ref().is_none(), "nothing sent yet");
    for (i, len) in [0usize, 5, INLINE_MAX, INLINE_MAX + 1, 1000]
        .into_iter()
        .enumerate()
    {
        let msg = vec![i as u8 + 1; len];
        a.send(ab, &msg).unwrap();
        let m = b.recv_ref().expect("recv_ref polls the transport once");
        assert_eq!(m.to_vec(), msg, "recv_ref, {len} bytes");
        drop(m);
        a.send(ab, &msg).unwrap();
        let m = b.recv().expect("recv polls the transport once");
        assert_eq!(m.to_vec(), msg, "recv, {len} bytes");
    }
    assert!(b.recv_ref().is_none() && b.recv().is_none(), "nothing more");
}

#[test]
fn small_messages_travel_inline_and_larger_ones_in_buffers() {
    let e = engine();
    let (mut a, mut b, ab, _) = pair(&e, Config::default(), None);
    for len in [0, 1, 55, 56, 57, 4095, 4096, 4097, 14 * 4096] {
        let m = message(len as u64, len);
        a.send(ab, &m).unwrap();
        let got = b
            .recv()
            .unwrap_or_else(|| panic!("{len}-byte message lost"));
        assert_eq!(got.is_inline(), len <= INLINE_MAX, "{len}");
        assert_eq!(
            got.buffers().count(),
            if len <= INLINE_MAX {
                0
            } else {
                len.div_ceil(4096)
            }
        );
        assert_eq!(got.to_vec(), m, "{len}");
        assert_eq!(got.chan(), 0);
    }
    assert!(b.recv().is_none());
    let c = b.counts();
    assert_eq!((c.rx_delivered, c.rx_no_buffer, c.rx_queue_full), (9, 0, 0));
}

#[test]
fn a_message_longer_than_fourteen_buffers_is_refused_at_the_sender() {
    let e = engine();
    let (mut a, _b, ab, _) = pair(&e, Config::default(), None);
    let err = a.send(ab, &vec![0; 14 * 4096 + 1]).unwrap_err();
    assert!(
        matches!(
            err,
            unet::SendError::TooLong {
                len: 57345,
                max: 57344
            }
        ),
        "{err}"
    );
}

#[test]
fn without_free_buffers_a_message_is_dropped_and_counted() {
    let e = engine();
    let config = Config {
        buffers: 4,
        free_depth: 4,
        ..Config::default()
    };
    let (mut a, mut b, ab, _) = pair(&e, config, None);
    // b gave its 2 receive buffers to the engine; hold both messages.
    a.send(ab, &[1; 4000]).unwrap();
    a.send(ab, &[2; 4000]).unwrap();
    a.send(ab, &[3; 4000]).unwrap();
    a.flush(100);
    assert_eq!(b.counts().rx_no_buffer, 1);
    let first = b.recv().unwrap().to_vec();
    assert_eq!(first, [1; 4000]);
    // Dropping the message gave its buffer back: the next one fits.
    a.send(ab, &[4; 4000]).unwrap();
    assert_eq!(b.recv().unwrap().to_vec(), [2; 4000]);
    assert_eq!(b.recv().unwrap().to_vec(), [4; 4000]);
}

#[test]
fn frames_that_match_no_filter_are_counted_and_dropped() {
    let net = LoopNet::new();
    let e = Engine::new(Box::new(
        net.attach("10.0.0.1:7000".parse().unwrap()).unwrap(),
    ));
    let other = Engine::new(Box::new(
        net.attach("10.0.0.2:7000".parse().unwrap()).unwrap(),
    ));
    let mut a = e.create_endpoint(Config::default(), None).unwrap();
    // A channel to an endpoint id no one has on the other engine: the
    // frame reaches it and matches no filter. (A channel to a missing
    // endpoint of this engine is refused when opened.)
    assert!(a.open_channel(e.local(), 999).is_err());
    let c = a.open_channel(other.local(), 999).unwrap();
    a.send(c, b"nobody").unwrap();
    assert_eq!(other.poll_transport(), 1);
    assert_eq!(other.counts().unmatched, 1);
    assert_eq!(a.counts().tx_frames, 1);
}

#[test]
fn checksummed_channels_arrive_intact() {
    let e = engine();
    let mut a = e.create_endpoint(Config::default(), None).unwrap();
    let mut b = e.create_endpoint(Config::default(), None).unwrap();
    let opts = unet::ChannelOptions { checksum: true };
    let ab = a.open_channel_with(e.local(), b.id(), opts).unwrap();
    b.open_channel(e.local(), a.id()).unwrap();
    for len in [0, 1, 57, 1001, 8192] {
        a.send(ab, &message(7, len)).unwrap();
        assert_eq!(b.recv().unwrap().to_vec(), message(7, len));
    }
    assert_eq!(b.counts().rx_bad_checksum, 0);
}

#[test]
fn an_extra_filter_routes_frames_to_a_channel() {
    let e = engine();
    let (mut a, mut b, ab, ba) = pair(&e, Config::default(), None);
    // A second channel of b, to a peer that does not exist: the extra
    // filter sends a's frames to it, above the channel's own filter.
    let side = b.open_channel("10.9.9.9:1".parse().unwrap(), 1).unwrap();
    let f = b
        .install_filter(
            side,
            &format!(
                "udp and udp[10:2] = {} and udp[8:2] = {}",
                endpoint_slot(a.id()),
                endpoint_slot(b.id())
            ),
            5,
        )
        .unwrap();
    a.send(ab, b"to the side").unwrap();
    assert_eq!(b.recv().unwrap().chan(), side);
    e.remove_filter(b.id(), f).unwrap();
    a.send(ab, b"back to the channel").unwrap();
    assert_eq!(b.recv().unwrap().chan(), ba);
    // A filter that does not parse changes nothing.
    assert!(b.install_filter(side, "udp and (", 5).is_err());
    a.send(ab, b"still routed").unwrap();
    assert_eq!(b.recv().unwrap().chan(), ba);
}

/// The transmit region is a ring freed in order as the engine takes
/// descriptors: exactly the messages taken give their bytes back, and a
/// descriptor the application placed outside the region itself frees
/// nothing beyond the messages pushed before it.
#[test]
fn the_transmit_region_frees_exactly_what_the_engine_has_taken() {
    let e = engine();
    let (mut a, mut b, ab, _) = pair(&e, Config::default(), None);
    a.set_drive(false);
    b.set_drive(false);
    let port = e.port(a.id()).unwrap();
    let len = 16384;
    // The first half of the buffer area: 256 buffers of 4 KiB, 64 messages.
    assert_eq!(a.layout().config.buffers as usize / 2 * 4096 / len, 64);
    let (mut next, mut got) = (0u64, 0u64);
    let mut fill = |a: &mut Endpoint| {
        let mut n = 0;
        while a.send(ab, &message(next, len)).is_ok() {
            next += 1;
            n += 1;
        }
        n
    };
    let mut take = |b: &mut Endpoint| {
        assert_eq!(e.service(&port), 32, "one service takes 32 descriptors");
        while let Some(m) = b.recv() {
            if m.len() == len {
                assert_eq!(seq_of(&m.to_vec()), Some(got));
                got += 1;
            }
        }
    };
    assert_eq!(fill(&mut a), 64);
    let own = (a.layout().area_len - 4096) as u32;
    a.write_area(own, b"placed by the application").unwrap();
    let d = TxDesc {
        len: 25,
        offset: own,
        chan: ab,
        ..TxDesc::default()
    };
    a.push_tx(d).unwrap();
    take(&mut b); // messages 0 to 31
    assert_eq!(fill(&mut a), 32);
    take(&mut b); // 32 to 63
    assert_eq!(fill(&mut a), 32);
    take(&mut b); // the application's own descriptor, then 64 to 94
    assert_eq!(fill(&mut a), 31);
    take(&mut b);
    take(&mut b);
    assert_eq!(e.service(&port), 0);
    assert_eq!(fill(&mut a), 64);
    assert_eq!(got, next - 64);
}

/// The byte ranges `[offset, offset + len)` of the transmit descriptors
/// `from..to` (push numbers) of `ep`, read from its transmit queue.
fn tx_ranges(ep: &Endpoint, from: u32, to: u32) -> Vec<(u32, u32)> {
    use unet::ring::QueueMem;
    let (txq, _, _) = unet::shm::queues(ep.segment(), ep.layout()).unwrap();
    (from..to)
        .map(|n| {
            let d: TxDesc = txq.read(n);
            (d.offset, d.offset + d.len)
        })
        .collect()
}

/// An application that waits for each message to be taken before it
/// sends the next (a ping-pong; here the engine runs in each send) keeps
/// writing the first 16 KiB of its transmit region, not the whole
/// region (1 MiB) in turn: the region starts again at its beginning
/// whenever the engine has taken everything.
///
/// Through the transmit queue: the sender does not drive the engine (so
/// its messages are not handed over directly, which writes no region), and
/// the engine's service is called for each.
#[test]
fn a_ping_pong_keeps_to_the_start_of_the_transmit_region() {
    let e = engine();
    let (mut a, mut b, ab, _) = pair(&e, Config::default(), None);
    a.set_drive(false);
    let port = e.port(a.id()).unwrap();
    let mut highest = 0;
    for seq in 0..4000u64 {
        // 128 bytes of the region each: 500 KiB in all.
        let m = message(seq, 100 + (seq % 29) as usize);
        a.send(ab, &m).unwrap();
        assert_eq!(e.service(&port), 1);
        let n = a.tx_pushed();
        assert_eq!(n, seq as u32 + 1);
        highest = highest.max(tx_ranges(&a, n - 1, n)[0].1);
        assert_eq!(b.recv().expect("delivered").to_vec(), m);
    }
    assert!(highest <= 16384, "the region was written up to {highest}");
    assert_eq!(a.counts().tx_descriptors, 4000);
}

/// The transmit region starts again at its beginning only once the engine
/// has taken every descriptor: while some are in flight it goes on
/// around the ring (no message is written over one not yet taken), and a
/// descriptor the application placed outside the region, still in flight
/// when every byte of the region is free, holds it back too. Every
/// message arrives intact, and afterwards the whole region is usable.
#[test]
fn the_transmit_region_starts_again_only_when_every_descriptor_is_taken() {
    let e = engine();
    let (mut a, mut b, ab, _) = pair(&e, Config::default(), None);
    a.set_drive(false);
    b.set_drive(false);
    let port = e.port(a.id()).unwrap();
    let mut received = Vec::new();
    let mut take = |b: &mut Endpoint| {
        loop {
            let n = e.service(&port);
            while let Some(m) = b.recv() {
                received.push(m.to_vec());
            }
            if n == 0 {
                break;
            }
        }
    };
    // In flight past the first 16 KiB: each message after the one before.
    let mut sent = Vec::new();
    for seq in 0..200u64 {
        let m = message(seq, 128);
        a.send(ab, &m).unwrap();
        sent.push(m);
    }
    let ranges = tx_ranges(&a, 0, 200);
    for (k, &(start, _)) in ranges.iter().enumerate() {
        assert_eq!(start, 128 * k as u32, "message {k}");
    }
    take(&mut b);
    // Everything taken: within the next 16 KiB the region starts again.
    let first = a.tx_pushed();
    for seq in 200..400u64 {
        let m = message(seq, 128);
        a.send(ab, &m).unwrap();
        sent.push(m);
        take(&mut b);
    }
    let ranges = tx_ranges(&a, first, first + 200);
    assert!(ranges.contains(&(0, 128)), "{ranges:?}");
    // 32 messages of 16 KiB, then one the application placed itself, and
    // one service: the 32 are taken, every byte of the region is free,
    // but the application's descriptor is not taken.
    for seq in 400..432u64 {
        let m = message(seq, 16384);
        a.send(ab, &m).unwrap();
        sent.push(m);
    }
    let own = (a.layout().area_len - 4096) as u32;
    a.write_area(own, &message(432, 64)).unwrap();
    a.push_tx(TxDesc {
        len: 64,
        offset: own,
        chan: ab,
        ..TxDesc::default()
    })
    .unwrap();
    sent.push(message(432, 64));
    assert_eq!(e.service(&port), 32);
    let at = a.tx_pushed();
    let m = message(433, 16384);
    a.send(ab, &m).unwrap();
    sent.push(m);
    let (start, _) = tx_ranges(&a, at, at + 1)[0];
    assert_eq!(
        start,
        32 * 16384,
        "no new start with a descriptor in flight"
    );
    take(&mut b);
    // The whole region is free again: 64 messages of 16 KiB fit.
    let mut fitted = 0;
    while a.send(ab, &message(434 + fitted, 16384)).is_ok() {
        sent.push(message(434 + fitted, 16384));
        fitted += 1;
    }
    assert_eq!(fitted, 64);
    take(&mut b);
    assert_eq!(received.len(), sent.len());
    for (k, (got, want)) in received.iter().zip(&sent).enumerate() {
        assert!(got == want, "message {k}");
    }
}

/// A message to an endpoint of the same engine goes without a frame, by
/// the verdict its channel keeps for the filter table's current version
/// (while no filter reads a byte that differs between two messages of a
/// channel). Every change of the table reaches that verdict at once: a
/// filter installed above a channel's own takes the very next message, its
/// removal (or its endpoint's) gives the next one back, a peer's filter
/// installed after a message found none lets the next one through, and
/// while some filter reads the message or its length each message is
/// classified by itself.
#[test]
fn a_channels_kept_verdict_follows_every_change_of_the_table() {
    let e = engine();
    let (mut a, mut b, ab, ba) = pair(&e, Config::default(), None);
    let (aid, bid) = (endpoint_slot(a.id()), endpoint_slot(b.id()));
    let side = b.open_channel("10.9.9.9:1".parse().unwrap(), 1).unwrap();
    let to_b = |a: &mut Endpoint, b: &mut Endpoint, m: &[u8]| {
        a.send(ab, m).unwrap();
        let got = b.recv().expect("delivered to b");
        assert_eq!(got.to_vec(), m);
        got.chan()
    };
    for _ in 0..3 {
        assert_eq!(to_b(&mut a, &mut b, b"kept"), ba);
    }

    // Another endpoint's filter above b's takes the next message; its
    // removal, then its endpoint's, gives the next one back.
    let stolen = format!("udp and udp[8:2] = {bid} and udp[10:2] = {aid}");
    let mut c = e.create_endpoint(Config::default(), None).unwrap();
    let ca = c.open_channel(e.local(), a.id()).unwrap();
    let f = c.install_filter(ca, &stolen, 5).unwrap();
    a.send(ab, b"to c").unwrap();
    assert_eq!(
        c.recv().map(|m| (m.chan(), m.to_vec())),
        Some((ca, b"to c".to_vec()))
    );
    assert!(b.recv().is_none());
    c.remove_filter(f).unwrap();
    assert_eq!(to_b(&mut a, &mut b, b"back"), ba);
    c.install_filter(ca, &stolen, 5).unwrap();
    a.send(ab, b"to c again").unwrap();
    assert_eq!(c.recv().map(|m| m.to_vec()), Some(b"to c again".to_vec()));
    drop(c);
    assert_eq!(to_b(&mut a, &mut b, b"back again"), ba);

    // A filter on the message's first byte (UDP byte 20): each message
    // goes by its own byte, an empty one (the load past its end) by b's
    // channel filter.
    let first = b
        .install_filter(
            side,
            &format!("udp and udp[8:2] = {bid} and udp[20] = 7"),
            5,
        )
        .unwrap();
    for (m, chan) in [
        (&[7u8, 1][..], side),
        (&[8, 1], ba),
        (&[7], side),
        (&[], ba),
        (&[7; 56], side),
    ] {
        assert_eq!(to_b(&mut a, &mut b, m), chan, "message {m:?}");
    }
    b.remove_filter(first).unwrap();
    assert_eq!(to_b(&mut a, &mut b, &[7]), ba);

    // A filter on the IPv4 total length (the message's length + 40).
    let ten = b
        .install_filter(
            side,
            &format!("udp and udp[8:2] = {bid} and ip[2:2] = 50"),
            5,
        )
        .unwrap();
    for (len, chan) in [(10, side), (9, ba), (10, side), (1000, ba)] {
        assert_eq!(to_b(&mut a, &mut b, &message(1, len)), chan, "{len} bytes");
    }
    b.remove_filter(ten).unwrap();
    assert_eq!(to_b(&mut a, &mut b, &message(1, 10)), ba);

    // A channel to an endpoint that opened none back matches no filter
    // until it does.
    let mut d = e.create_endpoint(Config::default(), None).unwrap();
    let ad = a.open_channel(e.local(), d.id()).unwrap();
    let unmatched = e.counts().unmatched;
    a.send(ad, b"nobody yet").unwrap();
    assert!(d.recv().is_none());
    assert_eq!(e.counts().unmatched, unmatched + 1);
    let da = d.open_channel(e.local(), a.id()).unwrap();
    a.send(ad, b"now d").unwrap();
    assert_eq!(
        d.recv().map(|m| (m.chan(), m.to_vec())),
        Some((da, b"now d".to_vec()))
    );
    assert_eq!(e.counts().unmatched, unmatched + 1);
    let sent = 3 + 1 + 1 + 1 + 1 + 5 + 1 + 4 + 1 + 2;
    assert_eq!(a.counts().tx_frames, sent);
    assert_eq!(a.counts().tx_descriptors, sent);
}

/// A channel that keeps its verdict keeps its peer's port with it; the
/// peer's removal lets go of it at once (the channel is closed), so that
/// two endpoints that sent to each other leave nothing behind, whichever
/// goes first, and an engine dropped with both still open takes both.
/// (Endpoint tables replaced by a removal hold their ports until the
/// threads have moved on: `gone` pins and unpins the calling thread until
/// they are. Other tests of this binary pin threads of their own in
/// parallel, and one descheduled while pinned holds everyone's reclamation
/// back, so `gone` allows ten seconds rather than a count of tries.)
#[test]
fn kept_verdicts_hold_no_port_past_its_removal() {
    let gone = |p: &std::sync::Weak<unet::engine::Port>| {
        let e = engine();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            for _ in 0..1000 {
                e.endpoints();
                if p.upgrade().is_none() {
                    return true;
                }
            }
            if std::time::Instant::now() > deadline {
                return false;
            }
            std::thread::yield_now();
        }
    };
    for b_first in [true, false] {
        let e = engine();
        let (mut a, mut b, ab, ba) = pair(&e, Config::default(), None);
        a.send(ab, b"to b").unwrap();
        b.send(ba, b"to a").unwrap();
        assert!(a.recv().is_some() && b.recv().is_some());
        let (pa, pb) = (
            Arc::downgrade(&e.port(a.id()).unwrap()),
            Arc::downgrade(&e.port(b.id()).unwrap()),
        );
        let (first, second, left, went) = if b_first {
            (b, a, &pa, &pb)
        } else {
            (a, b, &pb, &pa)
        };
        drop(first);
        assert!(gone(went), "the removed endpoint's port is let go");
        assert!(left.upgrade().is_some());
        drop(second);
        assert!(gone(left));
    }
    let e = engine();
    let (a, b) = (
        e.create_port(Config::default(), None).unwrap(),
        e.create_port(Config::default(), None).unwrap(),
    );
    let ab = e
        .open_channel(a.id(), e.local(), b.id(), Default::default())
        .unwrap();
    let ba = e
        .open_channel(b.id(), e.local(), a.id(), Default::default())
        .unwrap();
    for (from, chan) in [(&a, ab), (&b, ba)] {
        let mut ep = Endpoint::from_parts(
            from.id(),
            from.segment().clone(),
            *from.layout(),
            Box::new(Driver(e.clone(), from.clone())),
        )
        .unwrap();
        ep.send(chan, b"kept").unwrap();
    }
    assert_eq!((a.counts().tx_frames, b.counts().rx_delivered), (1, 1));
    let (pa, pb) = (Arc::downgrade(&a), Arc::downgrade(&b));
    drop((a, b, e));
    assert!(gone(&pa) && gone(&pb));
}

/// An application's side driving an engine of this process without
/// removing its port when dropped (a daemon's client, in effect).
struct Driver(Engine, Arc<unet::engine::Port>);

impl unet::endpoint::Control for Driver {
    fn open_channel(
        &mut self,
        _: u32,
        _: unet::Addr,
        _: u32,
        _: unet::ChannelOptions,
    ) -> Result<u16, unet::EngineError> {
        unreachable!()
    }
    fn install_filter(
        &mut self,
        _: u32,
        _: u16,
        _: &str,
        _: i32,
    ) -> Result<dpf::FilterId, unet::EngineError> {
        unreachable!()
    }
    fn remove_filter(&mut self, _: u32, _: dpf::FilterId) -> Result<(), unet::EngineError> {
        unreachable!()
    }
    fn set_applet(&mut self, _: u32, _: Option<&[u8]>) -> Result<(), unet::EngineError> {
        unreachable!()
    }
    fn counts(&mut self, _: u32) -> Result<unet::PortCounts, unet::EngineError> {
        Ok(self.1.counts())
    }
    fn closed_channels(&mut self, _: u32) -> Result<Vec<u16>, unet::EngineError> {
        Ok(Vec::new())
    }
    fn drive_tx(&mut self) {
        self.0.service(&self.1);
    }
    fn close(&mut self, _: u32) {}
}

/// A message to an endpoint of the same engine carries in its frame only
/// the bytes that installed filters can read; delivery copies the rest
/// from the sender's buffer area. A filter that reads deep into the
/// payload must still see it, and the message must arrive whole.
#[test]
fn filters_reading_the_payload_see_it_when_the_rest_stays_behind() {
    let e = engine();
    let (mut a, mut b, ab, ba) = pair(&e, Config::default(), None);
    let side = b.open_channel("10.9.9.9:1".parse().unwrap(), 1).unwrap();
    // Payload byte 1000: frame byte 1054, UDP byte 1020.
    let deep = format!(
        "udp and udp[8:2] = {} and udp[1020:1] = 7",
        endpoint_slot(b.id())
    );
    b.install_filter(side, &deep, 5).unwrap();
    for (len, byte, chan) in [
        (5000, 7, side),
        (5000, 8, ba),
        (1001, 7, side),
        (1000, 7, ba),
        (70, 7, ba),
    ] {
        let mut m = message(len as u64, len);
        if len > 1000 {
            m[1000] = byte;
        }
        a.send(ab, &m).unwrap();
        let got = b.recv().expect("delivered");
        assert_eq!(
            (got.len(), got.chan()),
            (len, chan),
            "{len} bytes, byte 1000 = {byte}"
        );
        assert_eq!(got.to_vec(), m);
    }
    // A deeper filter installed and removed again leaves the first one's
    // reach in force.
    let f = b.install_filter(side, "udp[3016:1] = 9", 5).unwrap();
    b.remove_filter(f).unwrap();
    let mut m = message(1, 5000);
    m[1000] = 7;
    a.send(ab, &m).unwrap();
    assert_eq!(
        b.recv().unwrap().chan(),
        side,
        "the first deep filter is still installed"
    );
}

/// An applet that traps drops that message, is counted and stays
/// installed; under `UninstallAfter(n)` it is removed after its n-th trap
/// and the endpoint works as standard U-Net again.
#[test]
fn a_trapping_applet_is_counted_and_uninstalled_by_policy() {
    for (policy, traps, installed) in [
        (unet::TrapPolicy::Keep, 3, true),
        (unet::TrapPolicy::UninstallAfter(2), 2, false),
    ] {
        let e = engine();
        let mut a = e.create_endpoint(Config::default(), None).unwrap();
        let mut b = e
            .create_endpoint(Config::default(), Some(unet::applets::ESCAPE))
            .unwrap();
        let ab = a.open_channel(e.local(), b.id()).unwrap();
        b.open_channel(e.local(), a.id()).unwrap();
        // Mode 6 with a = -1: newAlignedArray(-1), which traps.
        e.with_applet(b.id(), |ap| {
            ap.set_static_int("mode", 6).unwrap();
            ap.set_static_int("a", -1).unwrap();
        })
        .unwrap();
        e.set_trap_policy(b.id(), policy).unwrap();
        for i in 0..3u8 {
            a.send(ab, &[i; 40]).unwrap();
        }
        let got: Vec<Vec<u8>> = std::iter::from_fn(|| b.recv().map(|m| m.to_vec())).collect();
        assert_eq!(b.counts().applet_traps, traps, "{policy:?}");
        assert_eq!(e.has_applet(b.id()), installed, "{policy:?}");
        // Kept, every message trapped; uninstalled, the third arrived.
        let expect: Vec<Vec<u8>> = if installed { vec![] } else { vec![vec![2; 40]] };
        assert_eq!(got, expect, "{policy:?}");
    }
}

/// What an applet's method returned decides what becomes of its message,
/// on both sides: a negative value refuses it (a drop counted, the
/// transmit descriptor `Dropped`), any other value lets it go on, and a
/// `void` method lets it go on whatever its code left where a value would
/// come back (`VoidMethods` leaves a negative number there). None of them
/// is a trap.
#[test]
fn the_methods_value_decides_and_a_void_methods_leftover_does_not() {
    // (applet, mode for Escape, refused?)
    let cases: [(&[u8], Option<i32>, bool); 3] = [
        // Escape's default mode returns -1 from doTx and doRx.
        (unet::applets::ESCAPE, Some(0), true),
        // Mode 13 reads the buffer size and returns 0.
        (unet::applets::ESCAPE, Some(13), false),
        (unet::applets::VOID_METHODS, None, false),
    ];
    for (applet, mode, refused) in cases {
        let e = engine();
        let mut a = e.create_endpoint(Config::default(), Some(applet)).unwrap();
        let mut b = e.create_endpoint(Config::default(), Some(applet)).unwrap();
        // `s`, without an applet, sends to `b`.
        let mut s = e.create_endpoint(Config::default(), None).unwrap();
        let ab = a.open_channel(e.local(), b.id()).unwrap();
        b.open_channel(e.local(), a.id()).unwrap();
        let sb = s.open_channel(e.local(), b.id()).unwrap();
        b.open_channel(e.local(), s.id()).unwrap();
        for id in [a.id(), b.id()] {
            if let Some(mode) = mode {
                e.with_applet(id, |ap| ap.set_static_int("mode", mode).unwrap())
                    .unwrap();
            }
        }
        let what = format!("mode {mode:?}, refused {refused}");
        // Transmit: `doTx` on `a`'s descriptor.
        let n = a.tx_pushed();
        a.push_tx(TxDesc {
            len: 40,
            chan: ab,
            ..TxDesc::default()
        })
        .unwrap();
        assert!(a.flush(10), "{what}");
        let expect = if refused {
            TxStatus::Dropped
        } else {
            TxStatus::Sent
        };
        assert_eq!(a.tx_status(n), expect, "{what}");
        let c = a.counts();
        assert_eq!(
            (c.applet_drops, c.applet_traps),
            (u64::from(refused), 0),
            "{what}: doTx"
        );
        // Receive: `doRx` on `b` for each of three messages from `s`
        // (these applets deliver none).
        for i in 0..3u8 {
            s.send(sb, &[i; 40]).unwrap();
        }
        assert!(b.recv().is_none(), "{what}");
        let c = b.counts();
        assert_eq!(
            (c.applet_drops, c.applet_traps),
            (if refused { 3 } else { 0 }, 0),
            "{what}: doRx"
        );
        if mode.is_none() {
            // Each method ran: the last one on `b` saw a 40-byte message.
            let last = e.with_applet(b.id(), |ap| ap.static_int("last").unwrap());
            assert_eq!(last, Some(-41), "{what}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Every malformed transmit descriptor is rejected, counted, and moves
    /// nothing; every well-formed one is sent: on endpoints without an
    /// applet and with the standard one (whose descriptors `doTx` takes in
    /// a pass of their own).
    #[test]
    fn transmit_descriptors_are_checked(len in prop_oneof![0u32..70_000, any::<u32>()],
                                        offset in prop_oneof![0u32..(2 << 20), any::<u32>()],
                                        chan in prop_oneof![0u16..3, any::<u16>()],
                                        applet in prop_oneof![Just(None), Just(Some(unet::applets::STANDARD))]) {
        let e = engine();
        let (mut a, mut b, _, _) = pair(&e, Config::default(), applet);
        let area = a.layout().area_len as u64;
        let ok = u64::from(len) <= 14 * 4096 && u64::from(offset) + u64::from(len) <= area && chan == 0;
        let n = a.tx_pushed();
        a.push_tx(TxDesc { len, offset, chan, ..TxDesc::default() }).unwrap();
        prop_assert!(a.flush(10));
        let status = a.tx_status(n);
        let c = a.counts();
        if ok {
            prop_assert_eq!(status, TxStatus::Sent);
            prop_assert_eq!((c.tx_rejected, c.tx_frames), (0, 1));
            let m = b.recv().expect("delivered");
            prop_assert_eq!(m.len(), len as usize);
        } else {
            prop_assert_eq!(status, TxStatus::Rejected);
            prop_assert_eq!((c.tx_rejected, c.tx_frames), (1, 0));
            prop_assert!(b.recv().is_none());
        }
    }
}

/// Random sizes from 1 byte to 3 buffers through two endpoints, the
/// sender and the receiver on their own threads. Every message arrives
/// once, in order, intact, unless the engine counted it dropped for want
/// of a free buffer or of room in the receive queue (U-Net has no flow
/// control: that is the protocol's only loss).
fn transfer(applet: Option<&[u8]>, total: u64, max_len: usize) -> (u64, u64) {
    let e = engine();
    let (mut a, mut b, ab, _) = pair(&e, Config::default(), applet);
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let receiver = std::thread::spawn(move || {
        let (mut next, mut got) = (0u64, 0u64);
        let mut last = Instant::now();
        loop {
            let msg = b.recv().map(|m| m.to_vec());
            match msg {
                Some(v) => {
                    let s = seq_of(&v).unwrap_or_else(|| {
                        panic!("corrupt message of {} bytes after {next}", v.len())
                    });
                    assert!(
                        s >= next,
                        "message {s} after {next}: reordered or duplicated"
                    );
                    next = s + 1;
                    got += 1;
                    last = Instant::now();
                }
                None => {
                    if st.load(Ordering::Acquire) && last.elapsed() > Duration::from_millis(200) {
                        let c = b.counts();
                        return (
                            got,
                            c.rx_no_buffer + c.rx_queue_full + c.applet_drops,
                            c.applet_traps,
                        );
                    }
                    std::hint::spin_loop();
                }
            }
        }
    });
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for seq in 0..total {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let len = 8 + (x % (max_len as u64 - 7)) as usize;
        let m = message(seq, len);
        loop {
            match a.send(ab, &m) {
                Ok(()) => break,
                Err(unet::SendError::Full) => std::thread::yield_now(),
                Err(err) => panic!("{err}"),
            }
        }
    }
    assert!(a.flush(1_000_000));
    stop.store(true, Ordering::Release);
    let (got, dropped, traps) = receiver.join().unwrap();
    assert_eq!(traps, 0, "an applet trapped");
    assert_eq!(
        got + dropped,
        total,
        "{got} received + {dropped} counted drops != {total} sent"
    );
    (got, dropped)
}

#[test]
fn a_million_messages_with_standard_applets_arrive_once_in_order_intact() {
    let n = std::env::var("UNET_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let (got, dropped) = transfer(Some(unet::applets::STANDARD), n, 3 * 4096);
    eprintln!("{got} delivered, {dropped} dropped for want of a buffer or queue slot (counted)");
}

#[test]
fn messages_without_applets_arrive_once_in_order_intact() {
    let (got, dropped) = transfer(None, 200_000, 3 * 4096);
    eprintln!("{got} delivered, {dropped} dropped (counted)");
}

/// Sends `total` numbered messages of varied sizes from `a` to `b` (on
/// channels `ab`, `ba`) while `meanwhile` runs on another thread, given how
/// many `b` has received so far; checks that each arrives once, in order,
/// intact, and that `b` counted no drop or trap. A window of 64 keeps the
/// receiver's buffers and queue from running out, so that nothing may be
/// dropped at all. Returns what `meanwhile` returned.
fn flow_in_order_while<T: Send + 'static>(
    (mut a, mut b, ab, ba): (Endpoint, Endpoint, u16, u16),
    total: u64,
    meanwhile: impl FnOnce(Arc<AtomicU64>) -> T + Send + 'static,
) -> T {
    let received = Arc::new(AtomicU64::new(0));
    let r = received.clone();
    let receiver = std::thread::spawn(move || {
        let mut next = 0;
        while next < total {
            if let Some(m) = b.recv() {
                assert_eq!(m.chan(), ba, "message on the wrong channel");
                let v = m.to_vec();
                assert_eq!(seq_of(&v), Some(next), "lost, duplicated or corrupt");
                next += 1;
                r.store(next, Ordering::Release);
            }
        }
        b
    });
    let side = {
        let received = received.clone();
        std::thread::spawn(move || meanwhile(received))
    };
    for seq in 0..total {
        while seq - received.load(Ordering::Acquire) > 64 {
            std::hint::spin_loop();
        }
        let len = 8 + (seq as usize * 37) % 4000;
        while let Err(unet::SendError::Full) = a.send(ab, &message(seq, len)) {
            std::thread::yield_now();
        }
    }
    let out = side.join().unwrap();
    let mut b = receiver.join().unwrap();
    let c = b.counts();
    assert_eq!(
        (
            c.rx_no_buffer,
            c.rx_queue_full,
            c.applet_traps,
            c.applet_drops
        ),
        (0, 0, 0, 0)
    );
    out
}

/// Replacing the applet and the filters while messages flow loses and
/// duplicates nothing: each message sees the old configuration or the new.
#[test]
fn hot_swap_of_applet_and_filters_under_load() {
    let e = engine();
    let endpoints = pair(&e, Config::default(), Some(unet::applets::STANDARD));
    let (aid, bid, ba) = (endpoints.0.id(), endpoints.1.id(), endpoints.3);
    let swaps = flow_in_order_while(endpoints, 100_000, move |_| {
        let mut swaps = 0;
        let applets: [Option<&[u8]>; 3] = [
            Some(unet::applets::SIMPLE),
            None,
            Some(unet::applets::STANDARD),
        ];
        // The same frames as the channel's own filter, installed above it
        // and removed again: the classifier is republished each time.
        let filter = format!("udp and udp[8:2] = {bid} and udp[10:2] = {aid}");
        while swaps < 60 {
            e.set_applet(bid, applets[swaps as usize % 3]).unwrap();
            let f = e.install_filter(bid, ba, &filter, 1).unwrap();
            std::thread::sleep(Duration::from_millis(2));
            e.remove_filter(bid, f).unwrap();
            swaps += 1;
        }
        swaps
    });
    assert!(swaps >= 60);
}

/// The applets' compiled code evicted from the JIT's code cache again and
/// again while messages flow through them (as memory pressure would):
/// each invocation after an eviction compiles the code again within
/// jive's rebuild budget, and past it runs on the interpreter (the lent
/// `doRx` and `doTx` too), and no message is lost, duplicated, reordered,
/// corrupted or trapped on.
#[test]
fn evicting_the_applets_code_under_load_loses_nothing() {
    let e = engine();
    let endpoints = pair(&e, Config::default(), Some(unet::applets::STANDARD));
    let total = 50_000;
    let (evicted, rounds) = flow_in_order_while(endpoints, total, move |received| {
        let (mut evicted, mut rounds) = (0, 0);
        while received.load(Ordering::Acquire) < total {
            evicted += jive::jit::evict_oldest();
            rounds += 1;
            std::thread::sleep(Duration::from_micros(200));
        }
        (evicted, rounds)
    });
    // Code was evicted while the messages flowed (each eviction a
    // recompilation at the next invocation).
    assert!(evicted >= 2, "{evicted} entries evicted in {rounds} rounds");
    eprintln!("{evicted} entries evicted in {rounds} rounds");
}

/// The engine's per-round budget ([`unet::Budgets::round_time`]) shares
/// the engine's own threads among endpoints; it does not apply to the
/// thread that runs an endpoint's application, which may be the only one
/// driving it. With a round budget of zero, one call that drives the
/// engine takes every descriptor waiting, so a receiver on the same thread
/// gets every message without another send: none is left in the transmit
/// queue with nothing to drive it.
#[test]
fn the_applications_own_thread_drives_past_the_round_budget() {
    let net = LoopNet::new();
    let e = Engine::with_budgets(
        Box::new(net.attach("10.0.0.1:7000".parse().unwrap()).unwrap()),
        unet::Budgets {
            round_time: Duration::ZERO,
            ..unet::Budgets::default()
        },
    );
    let (mut a, mut b, ab, _) = pair(&e, Config::default(), Some(unet::applets::STANDARD));
    a.set_drive(false);
    for seq in 0..8u64 {
        a.send(ab, &message(seq, 100)).unwrap();
    }
    a.set_drive(true);
    a.poll_engine();
    let mut got = Vec::new();
    while let Some(m) = b.recv() {
        got.push(seq_of(&m.to_vec()).expect("intact"));
    }
    assert_eq!(got, (0..8).collect::<Vec<u64>>(), "every message, in order");
    assert_eq!(a.counts().tx_descriptors, 8);
}

/// What one endpoint saw of a stream: each message it received (channel
/// and bytes), in order, and its counters.
type Seen = (Vec<(u16, Vec<u8>)>, unet::PortCounts);

/// One run of [`stream`]: what `a` and `b` saw, and the engine's counters.
type StreamRun = (Seen, Seen, unet::EngineCounts);

/// Sends a random stream of messages (from `seed`) from `a` to `b`, with
/// `applet_a` and `applet_b` (on the jive engine `on`), on one thread that
/// drives both endpoints, so that every message is delivered at once and
/// the run is deterministic: the receiver's applet runs on the sending
/// thread, which is its own (no inbox). The receiver sometimes stops
/// receiving for a while, so that its queue and free buffers run out;
/// some messages are longer than a buffer, some than what the simple
/// applet's `TxBuf` holds, so that applets trap. With `framed`, a filter
/// that reads each frame's length (and matches none) is installed, so that
/// every message goes through a frame and is classified, as before the
/// frameless delivery.
fn stream(
    seed: u64,
    applet_a: Option<&[u8]>,
    applet_b: Option<&[u8]>,
    on: jive::Engine,
    framed: bool,
) -> StreamRun {
    let e = engine();
    let mut a = e.create_endpoint(Config::default(), applet_a).unwrap();
    let mut b = e.create_endpoint(Config::default(), applet_b).unwrap();
    let ab = a.open_channel(e.local(), b.id()).unwrap();
    let ab2 = a.open_channel(e.local(), b.id()).unwrap();
    let _ba = b.open_channel(e.local(), a.id()).unwrap();
    for id in [a.id(), b.id()] {
        if let Some(r) = e.with_applet(id, |ap| ap.set_engine(on)) {
            r.unwrap();
        }
    }
    if framed {
        a.install_filter(ab, "ip[2:2] = 1", 0).unwrap();
    }
    let mut x = seed | 1;
    let mut rand = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let (mut seen_a, mut seen_b) = (Vec::new(), Vec::new());
    let mut paused = 0;
    for seq in 0..600u64 {
        let r = rand();
        let len = match r % 8 {
            0 => 0,
            1..=3 => (r >> 8) as usize % (INLINE_MAX + 1),
            4 | 5 => (r >> 8) as usize % 4096,
            6 => 4096 + (r >> 8) as usize % 8192,
            _ => (r >> 8) as usize % 300,
        };
        let chan = if r & (1 << 40) == 0 { ab } else { ab2 };
        a.send(chan, &message(seq, len)).unwrap();
        if paused > 0 {
            paused -= 1;
            continue;
        }
        if r % 97 == 0 {
            paused = 200 + (r >> 20) as usize % 300;
        }
        while let Some(m) = b.recv() {
            seen_b.push((m.chan(), m.to_vec()));
        }
        while let Some(m) = a.recv() {
            seen_a.push((m.chan(), m.to_vec()));
        }
    }
    assert!(a.flush(1_000_000));
    while let Some(m) = b.recv() {
        seen_b.push((m.chan(), m.to_vec()));
    }
    while let Some(m) = a.recv() {
        seen_a.push((m.chan(), m.to_vec()));
    }
    let counts = e.counts();
    ((seen_a, a.counts()), (seen_b, b.counts()), counts)
}

/// A message to an applet's endpoint of the same engine, delivered without
/// a frame (from the sender's buffer area into `RxBuf`, or a `txPush`
/// delivered with the channel's kept verdict), gives exactly what it gave
/// through a frame: the same messages in the same order on both sides, the
/// same counters (deliveries, drops for want of buffers or queue slots,
/// applet traps and drops, frames sent) and the same engine counters, for
/// random streams, every receiving applet of the paper that works alone,
/// with no applet, the standard one or the simple one on the sender, on
/// the JIT and on the interpreter.
#[test]
fn an_applets_endpoint_receives_the_same_without_a_frame_as_through_one() {
    let engines: &[jive::Engine] = if jive::jit::available() {
        &[jive::Engine::Jit, jive::Engine::Interpreter]
    } else {
        &[jive::Engine::Interpreter]
    };
    let receivers: [(&str, &[u8]); 3] = [
        ("StandardUnet", unet::applets::STANDARD),
        ("RawUnet", unet::applets::SIMPLE),
        ("PingPong", unet::applets::PING_PONG),
    ];
    let mut traps = 0;
    for &engine in engines {
        for (name, applet_b) in receivers {
            for applet_a in [
                None,
                Some(unet::applets::STANDARD),
                Some(unet::applets::SIMPLE),
            ] {
                for seed in [0x9e37_79b9_7f4a_7c15u64, 0x2545_f491_4f6c_dd1d] {
                    let what = format!(
                        "{name} on {}, sender applet {}, seed {seed:#x}",
                        if engine == jive::Engine::Jit {
                            "the JIT"
                        } else {
                            "the interpreter"
                        },
                        applet_a.map_or("none", |a| if a == unet::applets::SIMPLE {
                            "RawUnet"
                        } else {
                            "StandardUnet"
                        })
                    );
                    let framed = stream(seed, applet_a, Some(applet_b), engine, true);
                    let frameless = stream(seed, applet_a, Some(applet_b), engine, false);
                    assert_eq!(framed.1.0.len(), frameless.1.0.len(), "{what}: messages");
                    assert!(framed.1.0 == frameless.1.0, "{what}: the messages differ");
                    assert!(framed.0.0 == frameless.0.0, "{what}: the replies differ");
                    assert_eq!(framed.1.1, frameless.1.1, "{what}: receiver's counters");
                    assert_eq!(framed.0.1, frameless.0.1, "{what}: sender's counters");
                    assert_eq!(framed.2, frameless.2, "{what}: engine's counters");
                    traps += frameless.0.1.applet_traps + frameless.1.1.applet_traps;
                    // PingPong delivers nothing to its application, and
                    // echoes every message back to the sender's.
                    assert!(
                        frameless.1.1.rx_delivered + frameless.0.1.rx_delivered > 0,
                        "{what}: nothing delivered"
                    );
                }
            }
        }
    }
    // The streams make applets trap (RawUnet's `doTx` on messages longer
    // than its `TxBuf`), and those traps are the same either way.
    assert!(traps > 0, "no stream made an applet trap");
}

/// An applet installed on, replaced on and removed from a receiving
/// endpoint again and again while a sender without an applet streams to it
/// (every message delivered without a frame, through the applet's inbox
/// when the receiver runs on its own thread, or straight to the standard
/// receive): every message arrives once, in order, intact, whichever way
/// each went.
#[test]
fn applets_come_and_go_under_a_frameless_stream() {
    let e = engine();
    let mut a = e.create_endpoint(Config::default(), None).unwrap();
    let b = e
        .create_endpoint(Config::default(), Some(unet::applets::STANDARD))
        .unwrap();
    let ab = a.open_channel(e.local(), b.id()).unwrap();
    let mut b = b;
    let ba = b.open_channel(e.local(), a.id()).unwrap();
    let bid = b.id();
    let swaps = flow_in_order_while((a, b, ab, ba), 60_000, move |received| {
        let applets: [Option<&[u8]>; 3] = [
            None,
            Some(unet::applets::SIMPLE),
            Some(unet::applets::STANDARD),
        ];
        let mut swaps = 0usize;
        while received.load(Ordering::Acquire) < 60_000 {
            e.set_applet(bid, applets[swaps % 3]).unwrap();
            swaps += 1;
            std::thread::sleep(Duration::from_millis(1));
        }
        swaps
    });
    assert!(swaps >= 3, "{swaps} swaps");
}

/// A message read in place keeps its receive queue slot until it is
/// dropped: the engine delivers into the other slots, counts what finds
/// the queue full, and never writes over the message being read.
#[test]
fn a_message_received_in_place_keeps_its_slot_until_dropped() {
    let e = engine();
    let config = Config {
        rx_depth: 4,
        ..Config::default()
    };
    let (mut a, mut b, ab, _) = pair(&e, config, None);
    let first = message(0, 40);
    a.send(ab, &first).unwrap();
    let m = b.recv_ref().expect("delivered");
    assert!(m.is_inline());
    assert_eq!((m.chan(), m.len()), (0, 40));
    // Four more: three fill the other slots, the fourth would go into the
    // held one (slot 0 again) and is counted as a full receive queue.
    for seq in 1..=4 {
        a.send(ab, &message(seq, 40)).unwrap();
    }
    assert_eq!(m.to_vec(), first, "the held slot was not written");
    drop(m);
    for seq in 1..=3 {
        let m = b.recv_ref().expect("delivered");
        assert_eq!(seq_of(&m.to_vec()), Some(seq));
    }
    assert!(b.recv_ref().is_none());
    let c = b.counts();
    assert_eq!((c.rx_delivered, c.rx_queue_full), (4, 1));
    // The slots freed as the messages went: the queue takes four again.
    for seq in 5..=8 {
        a.send(ab, &message(seq, 40)).unwrap();
    }
    for seq in 5..=8 {
        assert_eq!(seq_of(&b.recv().expect("delivered").to_vec()), Some(seq));
    }
}

/// `recv_ref` gives what `recv` gives, inline and in buffers, and the
/// buffers of a message read in place go back to the engine when it is
/// dropped: more messages than there are receive buffers all arrive.
#[test]
fn messages_received_in_place_match_and_give_their_buffers_back() {
    let e = engine();
    let (mut a, mut b, ab, _) = pair(&e, Config::default(), None);
    let rx_buffers = u64::from(Config::default().buffers / 2);
    let mut seq = 0;
    for len in [0, 1, 55, 56, 57, 4095, 4096, 4097, 14 * 4096] {
        for _ in 0..(2 * rx_buffers / 14).max(3) {
            let m = message(seq, len);
            a.send(ab, &m).unwrap();
            let got = b.recv_ref().expect("delivered");
            assert_eq!(got.is_inline(), len <= INLINE_MAX, "{len} bytes");
            assert_eq!(got.len(), len);
            assert_eq!(got.to_vec(), m, "{len} bytes, message {seq}");
            seq += 1;
        }
    }
    let c = b.counts();
    assert_eq!((c.rx_delivered, c.rx_no_buffer), (seq, 0));
    assert_eq!(b.bad_descriptors(), 0);
}

/// The buffers of received messages go back to the engine a batch at a
/// time ([`unet::GIVE_BACK`]), and every one gathered goes before the
/// receiver finds its queue empty: the free queue's producer index, as
/// the engine reads it, moves by whole batches while messages wait, and
/// catches up once none does.
#[test]
fn buffers_of_received_messages_go_back_in_batches_and_before_the_receiver_waits() {
    use unet::ring::QueueMem;
    let e = engine();
    let (mut a, mut b, ab, _) = pair(&e, Config::default(), None);
    let (_, _, free) = unet::shm::queues(b.segment(), b.layout()).unwrap();
    let given = || QueueMem::<u32>::head(&free).load(Ordering::Acquire);
    let start = given();
    let batch = unet::GIVE_BACK as u32;
    for seq in 0..u64::from(batch + 3) {
        a.send(ab, &message(seq, 100)).unwrap();
    }
    for seq in 0..u64::from(batch - 1) {
        let m = b.recv_ref().expect("delivered");
        assert_eq!(seq_of(&m.to_vec()), Some(seq));
    }
    assert_eq!(given(), start, "gathered, not yet given");
    drop(b.recv().expect("delivered"));
    assert_eq!(given(), start + batch, "a whole batch at once");
    for seq in u64::from(batch)..u64::from(batch + 3) {
        assert_eq!(seq_of(&b.recv().expect("delivered").to_vec()), Some(seq));
    }
    assert_eq!(given(), start + batch);
    assert!(b.recv_ref().is_none());
    assert_eq!(given(), start + batch + 3, "all given before waiting");
}

/// A ping-pong never leaves the engine without a receive buffer, whatever
/// the endpoint's size and the message's, with the buffers of received
/// messages gathered ([`unet::GIVE_BACK`]) and some given back by hand:
/// every message arrives intact and none is dropped for want of a buffer.
/// A message held (its descriptor kept, [`unet::Message::into_desc`])
/// while the next one is delivered keeps its buffers: the next one is in
/// others, so no buffer is handed out twice.
#[test]
fn a_ping_pong_in_buffers_never_starves_the_engine_nor_shares_a_buffer() {
    for buffers in [4, 16, 31, 32, 64, 128, 512] {
        let e = engine();
        let config = Config {
            buffers,
            buffer_size: 1024,
            ..Config::default()
        };
        let (mut a, mut b, ab, ba) = pair(&e, config, None);
        let rx_buffers = buffers - buffers.div_ceil(2);
        // Two messages in flight at most: each may take half the buffers.
        let largest = (rx_buffers as usize / 2 * 1024).min(a.max_message());
        let area = b.layout().area;
        let mut seq = 0;
        for round in 0..(8 * rx_buffers + 40) {
            let len = [57, 1024, 1025, largest][round as usize % 4].min(largest);
            let what = format!("{buffers} buffers, {len} bytes, round {round}");
            let (m1, m2, m3) = (
                message(seq, len),
                message(seq + 1, len),
                message(seq + 2, 57),
            );
            seq += 3;
            a.send(ab, &m1).unwrap();
            let held = b.recv().expect("delivered").into_desc();
            a.send(ab, &m2).unwrap();
            let next = b.recv().expect("delivered");
            assert_eq!(next.to_vec(), m2, "{what}");
            let theirs: Vec<u32> = next.buffers().collect();
            drop(next);
            let mut got = Vec::new();
            for i in 0..usize::from(held.nbufs) {
                let off = held.offset(i);
                assert!(!theirs.contains(&off), "{what}: buffer {off} twice");
                let n = (len - got.len()).min(1024);
                let mut piece = vec![0; n];
                b.segment().read_bytes(area + off as usize, &mut piece);
                got.extend_from_slice(&piece);
                assert!(b.give_buffer(off));
            }
            if held.nbufs == 0 {
                got = held.data[..len].to_vec();
            }
            assert_eq!(got, m1, "{what}");
            b.send(ba, &m3).unwrap();
            assert_eq!(a.recv().expect("answered").to_vec(), m3, "{what}");
        }
        let (ca, cb) = (a.counts(), b.counts());
        assert_eq!((ca.rx_no_buffer, cb.rx_no_buffer), (0, 0), "{buffers}");
        assert_eq!(cb.rx_delivered, seq / 3 * 2, "{buffers} buffers");
        assert_eq!(ca.rx_delivered, seq / 3, "{buffers} buffers");
    }
}

/// An application's side given a layout its segment does not hold is a
/// typed error, not a panic: a layout of a larger configuration (the
/// segment too short), and one whose offsets were changed; the right one
/// still makes an endpoint that sends.
#[test]
fn a_layout_its_segment_does_not_hold_is_refused() {
    let e = engine();
    let a = e.create_port(Config::default(), None).unwrap();
    let b = e.create_port(Config::default(), None).unwrap();
    let ab = e
        .open_channel(a.id(), e.local(), b.id(), Default::default())
        .unwrap();
    let parts = |layout| {
        Endpoint::from_parts(
            a.id(),
            a.segment().clone(),
            layout,
            Box::new(Driver(e.clone(), a.clone())),
        )
    };
    let bigger = Config {
        buffer_size: Config::default().buffer_size * 4,
        ..Config::default()
    };
    let big = unet::layout::Layout::new(bigger).unwrap();
    assert!(big.total > a.segment().len());
    let err = parts(big).expect_err("a segment too short");
    assert!(
        matches!(err, unet::ConfigError::Layout(ref m) if m.contains("shorter")),
        "{err}"
    );
    let mut moved = *a.layout();
    moved.area += 4096;
    let err = parts(moved).expect_err("offsets not the configuration's");
    assert!(
        matches!(err, unet::ConfigError::Layout(ref m) if m.contains("offsets")),
        "{err}"
    );
    let mut ep = parts(*a.layout()).unwrap();
    ep.send(ab, b"kept").unwrap();
    assert_eq!(a.counts().tx_frames, 1);
}
