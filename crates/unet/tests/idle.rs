//! An engine with threads of its own and no endpoint sleeps: its threads
//! block until an endpoint is added, [`Engine::stop`] is called or the
//! transport's descriptor (`Transport::poll_fd`) turns readable (and look
//! again every 100 ms), instead of waking tens of thousands of times a
//! second. (Its own binary, one test at a time: the CPU time measured is
//! the whole process's, every other thread of which sleeps meanwhile.)
//!
//! Each test starts an engine with two threads and no endpoint and then
//! checks, in turn:
//!
//! - its CPU time over a second is under 5% of a core (7 Dec 2026, 2-vCPU
//!   guest under a load of 2: 0.6 to 1.7 ms; before the threads blocked
//!   0.15 to 0.24 s, a thread napping 50 µs between polls for ever);
//! - an endpoint added wakes the threads at once: a message pushed right
//!   after (the endpoint not driving the engine, so only its threads
//!   deliver) arrives within 30 ms, the median of ten (measured: at most 0.1
//!   to 4 ms, mostly the guest's own delay in waking an idle processor, 2
//!   ms for a bare `eventfd` and `poll(2)` pair in C; with the wake-up left
//!   out, 50 to 60 ms: the endpoint comes 150 ms after the last one went,
//!   50 ms into a sleep of 100 ms);
//! - with the endpoint gone again the threads sleep again;
//! - `udp`: a datagram arriving wakes them through the socket, within
//!   30 ms, the median of ten (measured: at most 0.3 to 0.9 ms);
//! - [`Engine::stop`] returns within 50 ms, the median of five (measured: at
//!   most 0.2 ms; without the wake-up about 80 ms, the stop coming 20 ms
//!   into the threads' second sleep of 100 ms).
#![cfg(not(loom))]

use std::sync::Mutex;
use std::time::{Duration, Instant};

use unet::transport::{LoopNet, UdpTransport};
use unet::{Config, Engine};

/// One test at a time in this binary: the CPU time read is the process's.
static ONE: Mutex<()> = Mutex::new(());

/// Engine threads started.
const THREADS: usize = 2;
/// How long the CPU time of an idle engine is measured.
const WINDOW: Duration = Duration::from_secs(1);
/// The most CPU time an idle engine may take over [`WINDOW`]: 5% of a core.
const IDLE_CPU: Duration = Duration::from_millis(50);
/// Time for the threads to run out of work and block (about a thousand
/// empty polls: a millisecond or so).
const SETTLE: Duration = Duration::from_millis(150);
/// How long after starting its threads the engine is stopped: 20 ms into
/// their second sleep, which a stop that did not wake them would wait out.
const STOP_AFTER: Duration = Duration::from_millis(120);
/// The longest median wait for a message pushed just after its endpoint
/// was added (a thread that is not woken waits out its 100 ms sleep).
const FIRST_MESSAGE: Duration = Duration::from_millis(30);
/// The longest median [`Engine::stop`] of blocked threads.
const STOP: Duration = Duration::from_millis(50);
/// How many times each wake-up is timed. The bounds hold the median, so
/// that a round in which the machine held a thread up for its own reasons
/// does not decide; without the wake-ups every round waits out a sleep.
const ROUNDS: u64 = 10;

/// The median and the longest of `times`.
fn median_and_worst(mut times: Vec<Duration>) -> (Duration, Duration) {
    times.sort();
    (times[times.len() / 2], times[times.len() - 1])
}

/// The process's CPU time so far.
fn process_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime: {}", std::io::Error::last_os_error());
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The process's CPU time over [`WINDOW`], this thread asleep.
fn idle_cpu(engine: &str, when: &str) -> Duration {
    std::thread::sleep(SETTLE);
    let before = process_cpu();
    std::thread::sleep(WINDOW);
    let used = process_cpu() - before;
    eprintln!(
        "{engine}: {THREADS} engine threads, no endpoint ({when}): {used:?} of CPU in {WINDOW:?}"
    );
    assert!(
        used < IDLE_CPU,
        "{engine}: an engine with {THREADS} threads and no endpoint ({when}) took {used:?} \
         of CPU in {WINDOW:?} (at most {IDLE_CPU:?})"
    );
    used
}

/// Adds an endpoint to the blocked engine, pushes a message to itself at
/// once and times its arrival, [`ROUNDS`] times (the endpoint gone
/// between).
fn first_messages_arrive_at_once(engine: &Engine, name: &str) {
    let mut times = Vec::new();
    for round in 0..ROUNDS {
        std::thread::sleep(SETTLE);
        let mut a = engine.create_endpoint(Config::default(), None).unwrap();
        // Only the engine's threads deliver.
        a.set_drive(false);
        let chan = a.open_channel(engine.local(), a.id()).unwrap();
        let msg = format!("first message, round {round}");
        a.send(chan, msg.as_bytes()).unwrap();
        let sent = Instant::now();
        let got = loop {
            if let Some(m) = a.recv() {
                break m.to_vec();
            }
            assert!(
                sent.elapsed() < Duration::from_secs(5),
                "{name}: no message after 5 s: {:?}",
                a.counts()
            );
            std::hint::spin_loop();
        };
        let took = sent.elapsed();
        assert_eq!(got, msg.as_bytes());
        times.push(took);
    }
    let (median, worst) = median_and_worst(times);
    eprintln!(
        "{name}: first message after an endpoint was added: median {median:?}, at most {worst:?}"
    );
    assert!(
        median < FIRST_MESSAGE,
        "{name}: a message pushed on a new endpoint took {median:?} (median; at most \
         {FIRST_MESSAGE:?})"
    );
}

/// Stops the engine, whose threads are blocked, and times it; five times,
/// the threads started again between.
fn stops_at_once(engine: &Engine, name: &str) {
    let mut times = Vec::new();
    for round in 0..5 {
        if round > 0 {
            engine.start(THREADS).unwrap();
        }
        std::thread::sleep(STOP_AFTER);
        let t = Instant::now();
        engine.stop();
        times.push(t.elapsed());
    }
    let (median, worst) = median_and_worst(times);
    eprintln!("{name}: stop of blocked threads: median {median:?}, at most {worst:?}");
    assert!(
        median < STOP,
        "{name}: stop took {median:?} (median; at most {STOP:?})"
    );
}

/// `loop` has no descriptor: its threads block on the engine's own
/// wake-up alone (and look again every 100 ms).
#[test]
fn an_engine_without_endpoints_sleeps_until_one_is_added() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let net = LoopNet::new();
    let engine = Engine::new(Box::new(
        net.attach("10.0.0.1:7000".parse().unwrap()).unwrap(),
    ));
    engine.start(THREADS).unwrap();
    idle_cpu("loop", "never had one");
    first_messages_arrive_at_once(&engine, "loop");
    idle_cpu("loop", "its endpoints gone");
    stops_at_once(&engine, "loop");
}

/// `udp` has one: its threads also wake when a datagram arrives, and
/// take it at once.
#[test]
fn an_engine_without_endpoints_sleeps_on_its_transports_descriptor() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let engine = Engine::new(Box::new(
        UdpTransport::bind("127.0.0.1:0".parse().unwrap()).unwrap(),
    ));
    engine.start(THREADS).unwrap();
    idle_cpu("udp", "never had one");
    // A datagram too short to be a unet frame, which the transport counts
    // once an engine thread has received it.
    let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = engine.local().to_string();
    let mut times = Vec::new();
    for round in 1..=ROUNDS {
        std::thread::sleep(SETTLE);
        peer.send_to(b"?", &to).unwrap();
        let sent = Instant::now();
        while engine.counts().transport_not_unet < round {
            assert!(
                sent.elapsed() < Duration::from_secs(5),
                "udp: datagram {round} not received after 5 s: {:?}",
                engine.counts()
            );
            std::thread::sleep(Duration::from_micros(200));
        }
        times.push(sent.elapsed());
    }
    let (median, worst) = median_and_worst(times);
    eprintln!(
        "udp: a datagram to the sleeping engine taken after {median:?} (median), at most {worst:?}"
    );
    assert!(
        median < FIRST_MESSAGE,
        "udp: a datagram waited {median:?} (median) for the engine's threads (at most \
         {FIRST_MESSAGE:?})"
    );
    first_messages_arrive_at_once(&engine, "udp");
    idle_cpu("udp", "its endpoints gone");
    stops_at_once(&engine, "udp");
}
