//! Applications in other processes: an engine serves
//! endpoints over a Unix socket (`unet::daemon`) and real child processes
//! use them through `unet::client`, mapping the `memfd` they receive.
//!
//! # How the children are made
//!
//! A test that needs another process re-executes this test binary
//! (`std::env::current_exe()`) with the arguments
//! `--exact child_<role> --nocapture --test-threads=1`, so that it runs just
//! the test `child_<role>`, and with `UNET_CHILD=<role>` and
//! `UNET_SOCKET=<path>` (and `UNET_PEER=<endpoint id>`) in its environment.
//! The `child_*` tests check `UNET_CHILD`: in a normal run it is unset and
//! they return at once (so they pass trivially there); in a child they
//! play their role. A child reports to its parent with lines on stdout
//! containing `child: ` (the harness prints other text around them) and
//! takes commands from stdin, one per line.
//!
//! The parent runs the daemon in-process (`daemon::serve` on a socket under
//! the temporary directory, with its pid in the name) with an engine on a
//! `LoopNet` and a thread of its own (`Engine::start(1)`). The parent's own
//! endpoints do not drive the engine (`set_drive(false)`) where the test is
//! about the engine, so that their traffic flowing proves the engine's
//! thread alive. Tests that start a daemon run one at a time.
#![cfg(not(loom))]

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use unet::client::Client;
use unet::daemon::{self, Server};
use unet::frame::endpoint_slot;
use unet::layout::TxDesc;
use unet::transport::LoopNet;
use unet::{Config, Endpoint, Engine};

// ---------------------------------------------------------------------------
// Messages: each says its sequence number and length, with content derived
// from both, so that loss, duplication, reordering and corruption all show.

fn message(seq: u64, len: usize) -> Vec<u8> {
    let mut m = vec![0u8; len];
    let mut x = seq.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ len as u64 ^ 1;
    for b in m.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    m[..8].copy_from_slice(&seq.to_le_bytes());
    m
}

/// The length of message `seq`: 8 to 307 bytes (inline and one buffer),
/// and every 97th 9000 bytes (three buffers).
fn len_of(seq: u64) -> usize {
    if seq % 97 == 96 {
        9000
    } else {
        8 + (seq * 31 % 300) as usize
    }
}

/// The sequence number of an intact message.
fn seq_of(m: &[u8]) -> Option<u64> {
    let s = u64::from_le_bytes(m.get(..8)?.try_into().ok()?);
    (m.len() == len_of(s) && message(s, m.len()) == m).then_some(s)
}

/// How many messages a sender has in flight before it waits for an
/// acknowledgment (so that no receive queue or buffer pool overflows).
const WINDOW: u64 = 64;

/// Receives and checks the messages of one sender on `chan` of `ep`,
/// acknowledging them (the cumulative count, 8 bytes) on `chan`.
struct Sink {
    chan: u16,
    received: u64,
    acked: u64,
    /// Messages that arrived on other channels.
    others: u64,
}

impl Sink {
    fn new(chan: u16) -> Sink {
        Sink {
            chan,
            received: 0,
            acked: 0,
            others: 0,
        }
    }

    /// Drains `ep`, checking each message from the sender; acknowledges.
    fn step(&mut self, ep: &mut Endpoint) -> bool {
        let progress = self.drain(ep);
        if self.received > self.acked && ep.send(self.chan, &self.received.to_le_bytes()).is_ok() {
            self.acked = self.received;
        }
        progress
    }

    /// Drains `ep`, checking each message from the sender, without
    /// acknowledging.
    fn drain(&mut self, ep: &mut Endpoint) -> bool {
        let mut progress = false;
        while let Some(m) = ep.recv() {
            let (chan, v) = (m.chan(), m.to_vec());
            drop(m);
            progress = true;
            if chan != self.chan {
                self.others += 1;
                continue;
            }
            assert_eq!(
                seq_of(&v),
                Some(self.received),
                "message {} arrived damaged, duplicated or out of order ({} bytes)",
                self.received,
                v.len()
            );
            self.received += 1;
        }
        progress
    }
}

/// Sends numbered messages on `chan` of `ep` within [`WINDOW`] of the
/// acknowledgments arriving on `chan`.
struct Source {
    chan: u16,
    sent: u64,
    acked: u64,
}

impl Source {
    fn new(chan: u16) -> Source {
        Source {
            chan,
            sent: 0,
            acked: 0,
        }
    }

    /// Sends what the window allows (up to `limit` in all) and reads
    /// acknowledgments; messages on other channels are counted in `others`.
    fn step(&mut self, ep: &mut Endpoint, limit: u64, others: &mut u64) -> bool {
        let mut progress = false;
        while self.sent < limit && self.sent - self.acked < WINDOW {
            if ep
                .send(self.chan, &message(self.sent, len_of(self.sent)))
                .is_err()
            {
                break;
            }
            self.sent += 1;
            progress = true;
        }
        while let Some(m) = ep.recv() {
            let (chan, v) = (m.chan(), m.to_vec());
            drop(m);
            progress = true;
            if chan != self.chan {
                *others += 1;
                continue;
            }
            let ack: [u8; 8] = v[..].try_into().expect("an acknowledgment is 8 bytes");
            self.acked = self.acked.max(u64::from_le_bytes(ack));
        }
        progress
    }
}

/// Two endpoints of the parent's engine exchanging numbered messages a → b.
struct Pair {
    a: Endpoint,
    b: Endpoint,
    src: Source,
    sink: Sink,
    /// Messages that reached `a` from elsewhere.
    others: u64,
}

impl Pair {
    fn new(engine: &Engine) -> Pair {
        let mut a = engine.create_endpoint(Config::default(), None).unwrap();
        let mut b = engine.create_endpoint(Config::default(), None).unwrap();
        a.set_drive(false);
        b.set_drive(false);
        let ab = a.open_channel(engine.local(), b.id()).unwrap();
        let ba = b.open_channel(engine.local(), a.id()).unwrap();
        Pair {
            a,
            b,
            src: Source::new(ab),
            sink: Sink::new(ba),
            others: 0,
        }
    }

    fn step(&mut self, limit: u64) -> bool {
        let p = self.src.step(&mut self.a, limit, &mut self.others);
        self.sink.step(&mut self.b) | p
    }

    /// Exchanges `n` more messages, all of which must arrive, in order.
    fn exchange(&mut self, n: u64, deadline: Instant) {
        let limit = self.src.sent + n;
        while self.sink.received < limit {
            self.step(limit);
            check_deadline(deadline, || {
                format!("pair: {} of {limit} received", self.sink.received)
            });
            std::thread::yield_now();
        }
    }
}

fn check_deadline(deadline: Instant, what: impl FnOnce() -> String) {
    if Instant::now() > deadline {
        panic!("timed out: {}", what());
    }
}

// ---------------------------------------------------------------------------
// The parent's side: a daemon on a loop network, and child processes.

/// Tests that start a daemon run one at a time (the machine is small, and
/// timing matters to none of them but every one of them spins).
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

struct Rig {
    engine: Engine,
    server: Option<Server>,
    path: PathBuf,
}

impl Rig {
    fn new(tag: &str) -> Rig {
        Rig::with(tag, daemon::ServeOptions::default())
    }

    fn with(tag: &str, opts: daemon::ServeOptions) -> Rig {
        let net = LoopNet::new();
        let engine = Engine::new(Box::new(
            net.attach("10.0.0.1:7000".parse().unwrap()).unwrap(),
        ));
        engine.start(1).expect("an engine thread");
        let path =
            std::env::temp_dir().join(format!("unet-process-{tag}-{}.sock", std::process::id()));
        let server = daemon::serve_with(engine.clone(), &path, opts).unwrap();
        Rig {
            engine,
            server: Some(server),
            path,
        }
    }

    fn spawn(&self, role: &str, peer: u32) -> Kid {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                &format!("child_{role}"),
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("UNET_CHILD", role)
            .env("UNET_SOCKET", &self.path)
            .env("UNET_PEER", peer.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(i) = line.find("child: ")
                    && tx.send(line[i + 7..].to_string()).is_err()
                {
                    break;
                }
            }
        });
        Kid {
            stdin: child.stdin.take(),
            child,
            lines,
        }
    }

    /// Waits until endpoint `id` is gone from the engine.
    fn wait_removed(&self, id: u32, deadline: Instant) {
        while self.engine.port(id).is_some() {
            check_deadline(deadline, || format!("endpoint {id} was not reclaimed"));
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            s.shutdown();
        }
        self.engine.stop();
        assert!(
            !self.path.exists() || std::thread::panicking(),
            "the socket file outlived its server"
        );
    }
}

/// A child process.
struct Kid {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Kid {
    /// The rest of the next report starting with `word`.
    fn expect(&mut self, word: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    if let Some(rest) = line.strip_prefix(word) {
                        return rest.trim().to_string();
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    panic!("the child did not report {word:?} in {timeout:?}")
                }
                Err(RecvTimeoutError::Disconnected) => {
                    panic!(
                        "the child ended before reporting {word:?}: {:?}",
                        self.child.wait()
                    )
                }
            }
        }
    }

    fn say(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    /// Waits for the child to exit and checks that it succeeded.
    fn finish(mut self) {
        drop(self.stdin.take());
        let status = self.child.wait().unwrap();
        assert!(status.success(), "the child failed: {status}");
    }
}

impl Drop for Kid {
    fn drop(&mut self) {
        // A test that failed must not leave its child running.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------
// The children's side.

/// The connection to the parent's daemon, if this process is the child
/// playing `role`.
fn child(role: &str) -> Option<(Client, u32)> {
    if std::env::var("UNET_CHILD").ok()? != role {
        return None;
    }
    let client = Client::connect(std::env::var("UNET_SOCKET").unwrap()).unwrap();
    let peer = std::env::var("UNET_PEER").unwrap().parse().unwrap();
    Some((client, peer))
}

fn tell(line: &str) {
    println!("child: {line}");
}

fn wait_for(cmd: &str) {
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    assert_eq!(line.trim(), cmd, "the parent's command");
}

/// Sends `limit` numbered messages (or until killed) to the peer on `chan`.
fn send_stream(ep: &mut Endpoint, chan: u16, limit: u64) {
    let mut src = Source::new(chan);
    let mut others = 0;
    let deadline = Instant::now() + Duration::from_secs(20);
    while src.acked < limit {
        if !src.step(ep, limit, &mut others) {
            std::thread::yield_now();
        }
        check_deadline(deadline, || {
            format!("child: {} of {limit} acknowledged", src.acked)
        });
    }
    assert_eq!(others, 0, "nothing else was sent to this endpoint");
}

/// A frame of the daemon's protocol, by hand (see `unet::daemon`).
fn raw_frame(op: u8, payload: &[u8]) -> Vec<u8> {
    let mut v = ((1 + payload.len()) as u32).to_le_bytes().to_vec();
    v.push(op);
    v.extend_from_slice(payload);
    v
}

/// One reply: its status byte and payload.
fn raw_reply(s: &mut UnixStream) -> std::io::Result<(u8, Vec<u8>)> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let mut body = vec![0u8; u32::from_le_bytes(len) as usize];
    s.read_exact(&mut body)?;
    assert!(!body.is_empty(), "a reply has a status byte");
    let status = body.remove(0);
    Ok((status, body))
}

fn raw_call(s: &mut UnixStream, op: u8, payload: &[u8]) -> (u8, String) {
    s.write_all(&raw_frame(op, payload)).unwrap();
    let (status, body) = raw_reply(s).unwrap();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// Every operation naming endpoint `id`, by hand: OpenChannel,
/// InstallFilter, RemoveFilter, SetApplet, Counts, CloseEndpoint,
/// ClosedChannels, EngineCounts.
fn ops_on(id: u32) -> Vec<(u8, Vec<u8>)> {
    let i = id.to_le_bytes();
    let mut filter = [
        &i[..],
        &0u16.to_le_bytes(),
        &0i32.to_le_bytes(),
        &3u32.to_le_bytes(),
    ]
    .concat();
    filter.extend_from_slice(b"udp");
    vec![
        (
            3,
            [
                &i[..],
                &[10, 0, 0, 1],
                &7000u16.to_le_bytes(),
                &1u32.to_le_bytes(),
                &[0],
            ]
            .concat(),
        ),
        (4, filter),
        (5, [&i[..], &1u64.to_le_bytes()].concat()),
        (6, [&i[..], &[0]].concat()),
        (7, i.to_vec()),
        (8, i.to_vec()),
        (9, i.to_vec()),
        // EngineCounts naming it (one id).
        (10, [&1u16.to_le_bytes()[..], &i[..]].concat()),
    ]
}

/// The typed refusal of a request naming endpoint `id`, which the caller
/// does not own, as [`raw_call`] gives it.
fn not_yours(id: u32) -> (u8, String) {
    (
        daemon::STATUS_REFUSED,
        String::from_utf8_lossy(&daemon::Refusal::NotYours { id }.encode()).into_owned(),
    )
}

// ---------------------------------------------------------------------------
// 1. Two processes.

#[test]
fn two_processes_exchange_messages() {
    let _s = serial();
    let rig = Rig::new("exchange");
    let mut p = rig.engine.create_endpoint(Config::default(), None).unwrap();
    p.set_drive(false);
    let mut kid = rig.spawn("sender", p.id());
    let id: u32 = kid
        .expect("ready", Duration::from_secs(10))
        .parse()
        .unwrap();
    assert_ne!(id, p.id());
    let pc = p.open_channel(rig.engine.local(), id).unwrap();
    kid.say("go");
    let mut sink = Sink::new(pc);
    let deadline = Instant::now() + Duration::from_secs(15);
    while sink.received < 10_000 {
        if !sink.step(&mut p) {
            std::thread::yield_now();
        }
        check_deadline(deadline, || {
            format!("{} of 10000 messages received", sink.received)
        });
    }
    // The child's own view, through the daemon: every descriptor taken
    // and sent, none rejected. (The sink goes on acknowledging until the
    // child has its last acknowledgment.)
    let counts = loop {
        if !sink.step(&mut p) {
            std::thread::yield_now();
        }
        if let Some(rest) = kid
            .lines
            .try_recv()
            .ok()
            .and_then(|l| l.strip_prefix("counts ").map(str::to_string))
        {
            break rest;
        }
        check_deadline(deadline, || "the child did not report its counters".into());
    };
    assert_eq!(counts, "tx_descriptors=10000 tx_frames=10000 tx_rejected=0");
    kid.finish();
    assert_eq!((sink.received, sink.others), (10_000, 0));
    let pc = p.counts();
    assert_eq!(pc.rx_delivered, 10_000, "{pc:?}");
    assert_eq!((pc.rx_no_buffer, pc.rx_queue_full), (0, 0));
    rig.wait_removed(id, Instant::now() + Duration::from_secs(5));
}

#[test]
fn child_sender() {
    let Some((client, peer)) = child("sender") else {
        return;
    };
    let mut ep = client.create_endpoint(Config::default(), None).unwrap();
    let chan = ep.open_channel(client.local(), peer).unwrap();
    tell(&format!("ready {}", ep.id()));
    wait_for("go");
    send_stream(&mut ep, chan, 10_000);
    let c = ep.counts();
    tell(&format!(
        "counts tx_descriptors={} tx_frames={} tx_rejected={}",
        c.tx_descriptors, c.tx_frames, c.tx_rejected
    ));
}

// ---------------------------------------------------------------------------
// 2. A hostile process.

#[test]
fn a_hostile_process_cannot_hurt_others() {
    let _s = serial();
    let rig = Rig::new("hostile");
    let mut pair = Pair::new(&rig.engine);
    // The hostile process's peer: `c` takes its messages on a channel of
    // their own, and sends it some, so that the engine also writes into its
    // queues. The good pair is no peer of it: whatever it does, the pair
    // loses nothing. (A peer shares its receive queue with whoever it opened
    // channels to, so a flood from a peer can fill it while it is
    // descheduled; such drops are counted, and checked only to be the peer's
    // own.)
    let mut c = rig.engine.create_endpoint(Config::default(), None).unwrap();
    c.set_drive(false);
    let mut kid = rig.spawn("hostile", c.id());
    let h: u32 = kid
        .expect("ready", Duration::from_secs(10))
        .parse()
        .unwrap();
    let ch = c.open_channel(rig.engine.local(), h).unwrap();
    kid.say("go");
    assert_eq!(kid.expect("isolation", Duration::from_secs(10)), "ok");

    let deadline = Instant::now() + Duration::from_secs(20);
    let mut hostile_done = false;
    let (mut to_hostile, mut from_hostile) = (0u64, 0u64);
    let drain = |c: &mut Endpoint, from: &mut u64| {
        let mut progress = false;
        while let Some(m) = c.recv() {
            drop(m);
            *from += 1;
            progress = true;
        }
        progress
    };
    while pair.sink.received < 100_000 || !hostile_done {
        let before = pair.src.sent;
        let mut progress = pair.step(u64::MAX);
        progress |= drain(&mut c, &mut from_hostile);
        if pair.src.sent / 256 != before / 256 && c.send(ch, &message(to_hostile, 300)).is_ok() {
            to_hostile += 1;
        }
        if !hostile_done && kid.lines.try_recv().is_ok_and(|l| l == "done") {
            hostile_done = true;
        }
        if !progress {
            std::thread::yield_now();
        }
        check_deadline(deadline, || {
            format!("{} good messages received", pair.sink.received)
        });
    }
    // Everything in flight arrives too.
    let sent = pair.src.sent;
    while pair.sink.received < sent {
        pair.step(sent);
        drain(&mut c, &mut from_hostile);
        check_deadline(deadline, || {
            format!("{} of {sent} good messages received", pair.sink.received)
        });
    }
    let hc = rig
        .engine
        .port(h)
        .expect("the hostile endpoint lives until its process exits")
        .counts();
    let cc = c.counts();
    eprintln!(
        "hostile endpoint's counters: {hc:?}; {from_hostile} of its messages reached its peer, \
         whose counters are {cc:?}; {to_hostile} sent to it"
    );
    assert!(
        hc.tx_rejected > 0,
        "malformed transmit descriptors are counted: {hc:?}"
    );
    assert!(
        hc.queue_corrupt > 0,
        "inconsistent queue indices are counted: {hc:?}"
    );
    kid.say("bye");
    kid.finish();
    rig.wait_removed(h, Instant::now() + Duration::from_secs(5));

    // The good pair lost nothing and never saw a bad descriptor, nor a
    // message from the hostile process; the engine (whose thread alone
    // moves their traffic) still runs.
    let (ac, bc) = (pair.a.counts(), pair.b.counts());
    for c in [&ac, &bc] {
        assert_eq!(
            (
                c.tx_rejected,
                c.rx_no_buffer,
                c.rx_queue_full,
                c.queue_corrupt,
                c.free_invalid
            ),
            (0, 0, 0, 0, 0),
            "{c:?}"
        );
    }
    assert_eq!(
        pair.others, 0,
        "messages reached the good pair from elsewhere"
    );
    assert_eq!(pair.a.bad_descriptors() + pair.b.bad_descriptors(), 0);
    // Its peer's own queues were never corrupted either: what it lost, if
    // anything, is counted as drops of arriving frames.
    assert_eq!(
        (cc.tx_rejected, cc.queue_corrupt, cc.free_invalid),
        (0, 0, 0),
        "{cc:?}"
    );
    assert_eq!(c.bad_descriptors(), 0);
    assert!(sent >= 100_000);
    pair.exchange(1000, Instant::now() + Duration::from_secs(5));
}

#[test]
fn child_hostile() {
    let Some((client, peer)) = child("hostile") else {
        return;
    };
    let mut ep = client.create_endpoint(Config::default(), None).unwrap();
    let chan = ep.open_channel(client.local(), peer).unwrap();
    // A filter that would take every frame of the engine, if it were not
    // confined to this endpoint's own.
    ep.install_filter(chan, "udp", 1_000_000).unwrap();
    tell(&format!("ready {}", ep.id()));
    wait_for("go");

    // Another process's endpoint is out of reach, whatever the operation.
    let mut raw = UnixStream::connect(client.path()).unwrap();
    for (op, payload) in ops_on(peer) {
        assert_eq!(raw_call(&mut raw, op, &payload), not_yours(peer), "op {op}");
    }
    tell("isolation ok");

    let seed = u64::from(std::process::id());
    eprintln!("hostile child: seed {seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let seg = ep.segment().clone();
    let layout = *ep.layout();
    let area_len = layout.area_len as u32;
    // Surely wrong, first: a descriptor outside the buffer area and a
    // producer index far ahead of anything pushed.
    let _ = ep.push_tx(TxDesc {
        len: 64,
        offset: area_len,
        chan,
        ..TxDesc::default()
    });
    let wild = ep.tx_pushed().wrapping_add(4 * layout.config.tx_depth);
    seg.write_bytes(layout.tx.head(), &wild.to_le_bytes());
    std::thread::sleep(Duration::from_millis(20));
    // Then 1.5 s of random bytes everywhere, valid messages in between.
    let end = Instant::now() + Duration::from_millis(1500);
    let mut i = 0u64;
    let mut junk = [0u8; 64];
    while Instant::now() < end {
        let (lo, hi) = match rng.random_range(0..100) {
            // The header and the queues: indices and descriptors.
            0..35 => (0, layout.area),
            // The buffer area.
            35..60 => (layout.area, seg.len()),
            60..70 => {
                let bad = TxDesc {
                    len: rng.random(),
                    offset: if rng.random() {
                        rng.random()
                    } else {
                        area_len - 8
                    },
                    chan: if rng.random() { chan } else { rng.random() },
                    status: rng.random(),
                    reserved: rng.random(),
                };
                let _ = ep.push_tx(bad);
                (0, 0)
            }
            70..78 => {
                ep.give_buffer(rng.random());
                (0, 0)
            }
            78..95 => {
                let _ = ep.send(chan, &message(i, rng.random_range(8..400)));
                while let Some(m) = ep.recv() {
                    drop(m);
                }
                (0, 0)
            }
            _ => {
                let (head, tail) = [
                    (layout.tx.head(), layout.tx.tail()),
                    (layout.rx.head(), layout.rx.tail()),
                    (layout.free.head(), layout.free.tail()),
                ][rng.random_range(0..3)];
                let at = if rng.random() { head } else { tail };
                seg.write_bytes(at, &rng.random::<u32>().to_le_bytes());
                (0, 0)
            }
        };
        if hi > lo {
            let off = rng.random_range(lo..hi);
            let n = rng.random_range(1..=junk.len()).min(hi - off);
            rng.fill(&mut junk[..n]);
            seg.write_bytes(off, &junk[..n]);
        }
        i += 1;
        if i.is_multiple_of(16) {
            std::thread::sleep(Duration::from_micros(100));
        }
    }
    tell("done");
    wait_for("bye");
}

// ---------------------------------------------------------------------------
// 3. A process killed mid-stream.

#[test]
fn a_killed_process_is_reclaimed() {
    let _s = serial();
    let rig = Rig::new("killed");
    let mut pair = Pair::new(&rig.engine);
    let mut p = rig.engine.create_endpoint(Config::default(), None).unwrap();
    p.set_drive(false);
    let mut kid = rig.spawn("streamer", p.id());
    let e: u32 = kid
        .expect("ready", Duration::from_secs(10))
        .parse()
        .unwrap();
    let pe = p.open_channel(rig.engine.local(), e).unwrap();
    kid.say("go");
    let mut sink = Sink::new(pe);
    let deadline = Instant::now() + Duration::from_secs(15);
    while sink.received < 3000 {
        sink.step(&mut p);
        pair.step(u64::MAX);
        check_deadline(deadline, || {
            format!("{} streamed messages received", sink.received)
        });
    }
    // SIGKILL, mid-stream: the child is sending or waiting for the next
    // acknowledgment; either way it does not get to close anything. From
    // here on the parent sends nothing to it (no acknowledgments).
    kid.child.kill().unwrap();
    let status = kid.child.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGKILL)
    );
    while rig.engine.port(e).is_some() {
        pair.step(u64::MAX);
        sink.drain(&mut p);
        check_deadline(deadline, || format!("endpoint {e} was not reclaimed"));
    }
    while rig.server.as_ref().unwrap().connections() != 0 {
        pair.step(u64::MAX);
        check_deadline(deadline, || {
            "the dead process's connection is still counted".into()
        });
    }
    // What the child had sent before it died arrived intact and in order
    // (the sink checks each one).
    assert!(sink.received >= 3000);

    // The dead endpoint's filters are gone. Its slot is free again and
    // goes, with a new generation, to the next endpoint created; frames
    // that matched the dead endpoint's channel must now match nothing,
    // rather than reach the newcomer.
    let mut newcomer = rig.engine.create_endpoint(Config::default(), None).unwrap();
    newcomer.set_drive(false);
    assert_eq!(
        endpoint_slot(newcomer.id()),
        endpoint_slot(e),
        "the lowest free slot is reused"
    );
    assert_ne!(newcomer.id(), e, "under a new generation");
    while !p.flush(1000) {
        check_deadline(deadline, || {
            "the parent's last acknowledgments were not taken".into()
        });
    }
    let unmatched = rig.engine.counts().unmatched;
    // Acknowledgments pushed before the endpoint was reclaimed may have
    // been taken after it and counted as closed; none of the sends below
    // may add to that count.
    let closed_before = p.counts().tx_closed;
    // The parent's channel to the dead endpoint is closed: sending on it
    // fails at once, and nothing reaches the newcomer.
    for i in 0..50 {
        assert_eq!(
            p.send(pe, &message(i, 100)),
            Err(unet::SendError::ChannelClosed { chan: pe })
        );
        pair.step(u64::MAX);
    }
    assert_eq!(
        p.counts().tx_closed,
        closed_before,
        "nothing was even pushed"
    );
    assert_eq!(
        newcomer.counts().rx_delivered,
        0,
        "a filter of the dead endpoint survived"
    );
    assert!(newcomer.recv().is_none());
    // What the child's endpoint delivered before it was removed has been
    // waiting in `p`'s receive queue; after this, nothing more comes.
    sink.drain(&mut p);
    let streamed = sink.received;
    // The other traffic went on, and goes on.
    pair.exchange(5000, deadline);
    assert_eq!(
        rig.engine.counts().unmatched,
        unmatched,
        "no frame matched nothing"
    );
    sink.drain(&mut p);
    assert_eq!(
        sink.received, streamed,
        "nothing arrives from a dead process"
    );
}

#[test]
fn child_streamer() {
    let Some((client, peer)) = child("streamer") else {
        return;
    };
    let mut ep = client.create_endpoint(Config::default(), None).unwrap();
    let chan = ep.open_channel(client.local(), peer).unwrap();
    tell(&format!("ready {}", ep.id()));
    wait_for("go");
    // Until killed.
    send_stream(&mut ep, chan, u64::MAX);
}

// ---------------------------------------------------------------------------
// 4. The protocol, against a client that does not follow it.

#[test]
fn malformed_requests_get_errors_and_others_are_served() {
    let _s = serial();
    let rig = Rig::new("protocol");
    let good = Client::connect(&rig.path).unwrap();
    let mut ge = good.create_endpoint(Config::default(), None).unwrap();
    let mut q = rig.engine.create_endpoint(Config::default(), None).unwrap();
    let gq = ge.open_channel(good.local(), q.id()).unwrap();
    let qg = q.open_channel(rig.engine.local(), ge.id()).unwrap();

    let mut raw = UnixStream::connect(&rig.path).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    // Short: OpenChannel without its fields.
    let (st, text) = raw_call(&mut raw, 3, &[]);
    assert_eq!(
        (st, text.as_str()),
        (
            1,
            "OpenChannel: endpoint id needs bytes up to 4 but the request has 0"
        )
    );
    // Unknown operation.
    assert_eq!(
        raw_call(&mut raw, 0xee, &[1, 2, 3]),
        (1, "unknown operation 238".into())
    );
    // Empty frame.
    raw.write_all(&0u32.to_le_bytes()).unwrap();
    assert_eq!(
        raw_reply(&mut raw).unwrap(),
        (1, b"empty request frame".to_vec())
    );
    // A length past the end: 100 bytes of filter announced, 3 given.
    let mut f = [
        &1u32.to_le_bytes()[..],
        &0u16.to_le_bytes(),
        &0i32.to_le_bytes(),
        &100u32.to_le_bytes(),
    ]
    .concat();
    f.extend_from_slice(b"udp");
    let (st, text) = raw_call(&mut raw, 4, &f);
    assert_eq!(st, 1);
    assert!(text.contains("filter needs bytes up to 114"), "{text}");
    // An applet larger than jive accepts.
    let mut a = [
        &1u32.to_le_bytes()[..],
        &[1],
        &(daemon::MAX_APPLET as u32 + 1).to_le_bytes(),
    ]
    .concat();
    a.resize(a.len() + 16, 0);
    let (st, text) = raw_call(&mut raw, 6, &a);
    assert_eq!(st, 1);
    assert!(text.contains("exceeds the limit of 1048576"), "{text}");
    // Endpoints it does not own: another process's, one in the engine's
    // own process, one that does not exist; none is touched.
    for id in [ge.id(), q.id(), 4000] {
        for (op, payload) in ops_on(id) {
            assert_eq!(raw_call(&mut raw, op, &payload), not_yours(id), "op {op}");
        }
    }
    // Its own endpoint works, and its requests go on after all that.
    let cfg = [512u32, 4096, 256, 256, 512]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .chain([0])
        .collect::<Vec<_>>();
    let (st, body) = {
        raw.write_all(&raw_frame(2, &cfg)).unwrap();
        raw_reply(&mut raw).unwrap()
    };
    assert_eq!((st, body.len()), (0, 4));
    let own = u32::from_le_bytes([body[0], body[1], body[2], body[3]]);
    assert!(rig.engine.port(own).is_some());
    let (st, _) = raw_call(&mut raw, 7, &own.to_le_bytes());
    assert_eq!(st, 0);
    // A huge length: an error, then the connection closes.
    raw.write_all(&u32::MAX.to_le_bytes()).unwrap();
    let (st, text) = raw_reply(&mut raw).unwrap();
    assert_eq!(st, 1);
    assert!(
        text.starts_with(b"frame of 4294967295 bytes exceeds the limit"),
        "{}",
        String::from_utf8_lossy(&text)
    );
    let mut rest = Vec::new();
    assert_eq!(
        raw.read_to_end(&mut rest).unwrap(),
        0,
        "the connection is closed"
    );
    drop(raw);
    rig.wait_removed(own, Instant::now() + Duration::from_secs(5));

    // Random frames on more connections; a frame cut short by a close.
    let mut rng = StdRng::seed_from_u64(12);
    for _ in 0..4 {
        let mut s = UnixStream::connect(&rig.path).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        for _ in 0..200 {
            let mut body = vec![0u8; rng.random_range(0..40)];
            rng.fill(&mut body[..]);
            let op = rng.random_range(0..12);
            let (st, _) = raw_call(&mut s, op, &body);
            assert!(
                [
                    daemon::STATUS_OK,
                    daemon::STATUS_ERR,
                    daemon::STATUS_REFUSED
                ]
                .contains(&st),
                "status {st}"
            );
        }
        s.write_all(&100u32.to_le_bytes()).unwrap();
        s.write_all(&[3; 10]).unwrap();
    }

    // The well-behaved client never noticed.
    ge.send(gq, b"still served").unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let got = loop {
        if let Some(m) = q.recv() {
            break m.to_vec();
        }
        check_deadline(deadline, || {
            "the good client's message did not arrive".into()
        });
    };
    assert_eq!(got, b"still served");
    q.send(qg, b"and answered").unwrap();
    let got = loop {
        if let Some(m) = ge.recv() {
            break (m.chan(), m.to_vec());
        }
        check_deadline(deadline, || "the answer did not arrive".into());
        std::thread::yield_now();
    };
    assert_eq!(got, (gq, b"and answered".to_vec()));
    let c = ge.counts();
    assert_eq!((c.tx_frames, c.rx_delivered), (1, 1));
    // Only the good client is connected, and only its endpoint and the
    // parent's exist.
    while rig.server.as_ref().unwrap().connections() != 1 {
        check_deadline(deadline, || {
            "the closed connections are still counted".into()
        });
        std::thread::sleep(Duration::from_millis(1));
    }
    let live = rig.engine.endpoints();
    let mut expected = vec![ge.id(), q.id()];
    expected.sort();
    assert_eq!(live, expected);
}

// ---------------------------------------------------------------------------
// The engine's counters through the daemon: what a client may read, and
// how often.

/// Waits until `ep` has `n` messages and returns them.
fn recv_n(ep: &mut Endpoint, n: usize, deadline: Instant) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    while got.len() < n {
        match ep.recv() {
            Some(m) => got.push(m.to_vec()),
            None => {
                check_deadline(deadline, || format!("{} of {n} messages", got.len()));
                std::thread::yield_now();
            }
        }
    }
    got
}

#[test]
fn a_client_reads_the_engines_totals_and_its_own_endpoints_only() {
    let _s = serial();
    let rig = Rig::new("engine-counts");
    let (ca, cb) = (
        Client::connect(&rig.path).unwrap(),
        Client::connect(&rig.path).unwrap(),
    );
    let mut a = ca.create_endpoint(Config::default(), None).unwrap();
    let mut b = cb.create_endpoint(Config::default(), None).unwrap();
    let ab = a.open_channel(ca.local(), b.id()).unwrap();
    b.open_channel(cb.local(), a.id()).unwrap();
    for i in 0..5u8 {
        a.send(ab, &[i; 40]).unwrap();
    }
    recv_n(&mut b, 5, Instant::now() + Duration::from_secs(10));

    // Its own endpoint's counters and the engine's totals, as the engine
    // has them.
    let got = ca.engine_counts(&[a.id()]).unwrap();
    assert_eq!(got.engine, rig.engine.counts());
    assert_eq!(got.endpoints.len(), 1);
    assert_eq!(got.endpoints[0].0, a.id());
    assert_eq!(
        got.endpoints[0].1,
        rig.engine.port(a.id()).unwrap().counts()
    );
    assert_eq!(got.endpoints[0].1.tx_frames, 5);
    // The totals alone.
    assert!(ca.engine_counts(&[]).unwrap().endpoints.is_empty());

    // Another connection's endpoint, alone or beside one's own, and an id
    // no endpoint has: the same typed refusal, naming the first such id,
    // and nothing is read.
    let refused = |ids: &[u32], id: u32| match ca.engine_counts(ids) {
        Err(unet::EngineError::Refused(daemon::Refusal::NotYours { id: got })) => {
            assert_eq!(got, id, "{ids:?}")
        }
        other => panic!("{ids:?}: {other:?}"),
    };
    refused(&[b.id()], b.id());
    refused(&[a.id(), b.id()], b.id());
    refused(&[4000, a.id()], 4000);
    // b's owner reads b's.
    let got = cb.engine_counts(&[b.id()]).unwrap();
    assert_eq!(got.endpoints[0].1.rx_delivered, 5);
    drop((a, b, ca, cb));
}

#[test]
fn a_flood_of_counter_reads_stays_within_the_process_budget() {
    let _s = serial();
    let per_second = 4;
    let rig = Rig::with(
        "counts-flood",
        daemon::ServeOptions {
            max_engine_counts_per_second: per_second,
            ..daemon::ServeOptions::default()
        },
    );
    let mut raw = UnixStream::connect(&rig.path).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let start = Instant::now();
    let (mut ok, mut refused) = (0u32, 0u32);
    let mut last_refusal = start;
    for _ in 0..2000 {
        let (st, body) = {
            raw.write_all(&raw_frame(10, &0u16.to_le_bytes())).unwrap();
            raw_reply(&mut raw).unwrap()
        };
        match st {
            daemon::STATUS_OK => {
                assert_eq!(body.len(), 8 * daemon::ENGINE_COUNTERS);
                ok += 1;
            }
            daemon::STATUS_REFUSED => {
                match daemon::Refusal::decode(&body) {
                    Some(daemon::Refusal::CountsBudget {
                        per_second: p,
                        retry_ms,
                    }) => {
                        assert_eq!(p, per_second);
                        assert!((1..=1000 / per_second).contains(&retry_ms), "{retry_ms}");
                    }
                    other => panic!("{other:?}"),
                }
                refused += 1;
                last_refusal = Instant::now();
            }
            _ => panic!("status {st}: {}", String::from_utf8_lossy(&body)),
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    eprintln!("{ok} reads served, {refused} refused in {elapsed:.3} s");
    // A second's worth at once, then the rate: never more.
    assert!(ok >= per_second, "the first second's worth is served");
    assert!(
        f64::from(ok) <= f64::from(per_second) * (1.0 + elapsed) + 1.0,
        "{ok} reads in {elapsed:.3} s over a budget of {per_second} a second"
    );
    assert!(refused > 0);

    // The budget is the process's: another connection of it finds it spent,
    // unless the budget had time to refill.
    let other = Client::connect(&rig.path).unwrap();
    match other.engine_counts(&[]) {
        Err(unet::EngineError::Refused(daemon::Refusal::CountsBudget { .. })) => {}
        Ok(_) => assert!(
            last_refusal.elapsed() >= Duration::from_millis(u64::from(1000 / per_second)),
            "a second connection of the flooding process read at once"
        ),
        Err(e) => panic!("{e}"),
    }
    // Another process's is its own.
    let mut kid = rig.spawn("counts", 0);
    assert_eq!(kid.expect("counts", Duration::from_secs(30)), "ok");
    kid.finish();
    // The flooding connection is still served.
    assert_eq!(raw_call(&mut raw, 1, &[]).0, daemon::STATUS_OK);
}

#[test]
fn child_counts() {
    let Some((client, _)) = child("counts") else {
        return;
    };
    match client.engine_counts(&[]) {
        Ok(_) => tell("counts ok"),
        Err(e) => tell(&format!("counts {e}")),
    }
}
