//! The shared-memory channel's waiting rule (docs/idl.md, "Waiting";
//! `idl::rt::wait::WaitRule`, and the C run time's `idl_wait_budget` and
//! `idl_wait_polled`):
//! - as a pure state machine fed scripts of outcomes (a wait's poll would
//!   be answered in time, or would run out): after a loaded phase of any
//!   length, a side whose polls are answered again polls on every wait
//!   from at most `PROBE_MAX` waits on; under a load that never lets a
//!   poll be answered it polls on one wait in `PROBE_MAX`;
//! - the C rule makes the same choice as the Rust rule on every wait of
//!   the same scripts (`tests/c/wait_rule_test.c`, compiled with gcc at
//!   test time; without gcc that test prints why and passes, unless
//!   `IDL_REQUIRE_GCC=1`);
//! - over a real channel between two processes: a client whose waits ran
//!   out for a long phase (a server that takes far longer than a poll)
//!   goes back to polling within a few calls once its server answers at
//!   once again.
//!
//! The server of the last is this test executable re-run as a child process (with
//! `--exact busy_peer` and [`PEER_FD`] naming the inherited channel): a
//! raw loop over the mapping that polls the state word without ever
//! sleeping, so that it is always running when the client polls, and
//! answers key [`SLOW`] after [`SLOW_TIME`] and every other key at once.
//! The client counts its futex sleeps with `ClientEnd::wait_counts`.

use std::os::fd::AsRawFd;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU16, AtomicU32, Ordering};
use std::time::Duration;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};

use idl::rt::Status;
use idl::rt::shm::{self, CLOSED, ClientEnd, Config, LINE, REPLY, REPLY_CLOSED, REQUEST, WAITER};
use idl::rt::wait::WaitRule;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

mod support;

use support::have_gcc;

// ------------------------------------------------------------ the pure rule

/// Replays `script` through the Rust rule: per wait, 'a' if a poll would be
/// answered in time, 'r' if it would run out; returns per wait 'P' polled,
/// 'B' polled as a probe, 'S' slept at once.
fn replay(spin: u32, script: &str) -> String {
    let mut r = WaitRule::new(spin);
    script
        .chars()
        .map(|c| {
            let b = r.budget();
            if b.polls == 0 {
                return 'S';
            }
            r.polled(b, c == 'a');
            if b.probe { 'B' } else { 'P' }
        })
        .collect()
}

/// A phase of `n` waits whose polls all run out (both cores busy, or the
/// peer waiting for the core our polling holds) or all are answered (the
/// peer runs).
fn loaded(n: usize) -> String {
    "r".repeat(n)
}

fn idle(n: usize) -> String {
    "a".repeat(n)
}

/// The most waits after the phase change before a side polls again.
const K: usize = WaitRule::PROBE_MAX as usize;

/// The loaded lengths tried: every short one, and long ones (the
/// benchmark's loaded batch with its warm-up is 1,252 calls).
fn loaded_lengths() -> impl Iterator<Item = usize> {
    (0..300).chain([1000, 1252, 2032, 5000, 100_000])
}

#[test]
fn after_a_loaded_phase_a_side_polls_again_within_probe_max_waits() {
    let _cpus = hold_cpus();
    for n in loaded_lengths() {
        let out = replay(2000, &(loaded(n) + &idle(4 * K)));
        let after = &out[n..];
        let first = after
            .find(|c| c != 'S')
            .unwrap_or_else(|| panic!("after {n} loaded waits the side never polled: {after}"));
        assert!(
            first < K,
            "after {n} loaded waits the side slept {first} waits before polling: {after}"
        );
        assert!(
            after[first + 1..].chars().all(|c| c == 'P'),
            "after {n} loaded waits and a poll answered, the side still slept: {after}"
        );
    }
}

#[test]
fn under_a_permanent_load_a_side_polls_on_one_wait_in_probe_max() {
    let _cpus = hold_cpus();
    const WAITS: usize = 100_000;
    let out = replay(2000, &loaded(WAITS));
    let polls = out.chars().filter(|&c| c != 'S').count();
    // Two polls before it sleeps, then probes 4, 8 and 16 waits apart
    // before the gap reaches its largest.
    assert!(
        polls <= WAITS / K + 5,
        "{polls} of {WAITS} waits polled under a load where no poll is answered"
    );
    // Past the first probes, exactly one wait in every PROBE_MAX polls.
    let steady = &out[1000..1000 + 64 * K];
    for (i, w) in steady.as_bytes().chunks(K).enumerate() {
        assert_eq!(
            w.iter().filter(|&&c| c != b'S').count(),
            1,
            "window {i} of {K} waits"
        );
    }
    // A side that never polls does not start to.
    assert!(
        replay(0, &(loaded(100) + &idle(100)))
            .chars()
            .all(|c| c == 'S')
    );
}

#[test]
fn a_load_that_answers_now_and_then_still_keeps_polling_rare() {
    let _cpus = hold_cpus();
    // One poll in ten answered (a peer that gets a core now and then):
    // each answered poll costs at most the two polls that must run out
    // before the side sleeps again.
    let mut rng = StdRng::seed_from_u64(0x1d1e);
    let script: String = (0..100_000)
        .map(|_| {
            if rng.random_range(0..10) == 0 {
                'a'
            } else {
                'r'
            }
        })
        .collect();
    let out = replay(2000, &script);
    let polls = out.chars().filter(|&c| c != 'S').count();
    assert!(polls <= 100_000 / 8, "{polls} of 100000 waits polled");
}

/// `tests/c/wait_rule_test.c` with the C run time, built once per test run.
fn wait_rule_test() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| support::build_c_test("wait_rule_test"))
}

/// The C rule's choices for `script`.
fn replay_c(spin: u32, script: &str) -> String {
    let mut child = Command::new(wait_rule_test())
        .arg(spin.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run wait_rule_test");
    let mut stdin = child.stdin.take().expect("piped stdin");
    let script = script.to_string();
    let feed = std::thread::spawn(move || stdin.write_all(script.as_bytes()));
    let out = child.wait_with_output().expect("wait_rule_test's output");
    feed.join().expect("feeder").expect("write the script");
    assert!(out.status.success(), "wait_rule_test failed");
    String::from_utf8(out.stdout)
        .expect("ASCII output")
        .trim_end()
        .to_string()
}

#[test]
fn the_c_rule_makes_the_same_choice_as_the_rust_rule_on_every_wait() {
    let _cpus = hold_cpus();
    if !have_gcc("the_c_rule_makes_the_same_choice_as_the_rust_rule_on_every_wait") {
        return;
    }
    let mut scripts: Vec<String> = loaded_lengths()
        .step_by(7)
        .map(|n| loaded(n) + &idle(4 * K) + &loaded(n / 3) + &idle(K))
        .collect();
    // Runs of waits whose polls are mostly answered or mostly run out, of
    // random lengths and mixes.
    let mut rng = StdRng::seed_from_u64(0x7a17);
    for _ in 0..40 {
        let mut s = String::new();
        while s.len() < 5000 {
            let len = rng.random_range(1..400);
            let answered = rng.random_range(0..=10);
            s.extend((0..len).map(|_| {
                if rng.random_range(0..10) < answered {
                    'a'
                } else {
                    'r'
                }
            }));
        }
        scripts.push(s);
    }
    for (i, script) in scripts.iter().enumerate() {
        for spin in [2000, 1, 0] {
            let (rust, c) = (replay(spin, script), replay_c(spin, script));
            assert_eq!(rust.len(), script.len());
            if let Some(at) = rust.chars().zip(c.chars()).position(|(a, b)| a != b) {
                panic!(
                    "script {i}, spin {spin}: at wait {at} the Rust rule did {} and the C rule {}",
                    &rust[at..at + 1],
                    c.get(at..at + 1).unwrap_or("nothing")
                );
            }
            assert_eq!(rust, c, "script {i}, spin {spin}");
        }
    }
}

// ------------------------------------------------------- two processes

/// The environment variable naming the busy peer's channel descriptor.
const PEER_FD: &str = "IDL_WAIT_PEER_FD";
/// The environment variable naming the CPU the busy peer pins itself to.
const PEER_CPU: &str = "IDL_WAIT_PEER_CPU";
/// The key the busy peer answers after [`SLOW_TIME`].
const SLOW: u16 = 1;
/// Far over the longest a side polls (`SPIN_TIME`, 10 µs): every poll of
/// a slow call runs out.
const SLOW_TIME: Duration = Duration::from_micros(300);

/// Calls of the slow phase: more than the waits the rule needs to reach
/// its longest gap between probes (the rule before this test existed
/// spaced its probes up to 1,024 waits apart, reached after 1,008).
const SLOW_CALLS: u64 = 1100;
/// Calls of the fast phase, whose futex sleeps are counted.
const FAST_CALLS: u64 = 1000;

/// The busy peer in the child process: returns only when the channel
/// closes.
#[test]
fn busy_peer() {
    let Ok(_) = std::env::var(PEER_FD) else {
        return;
    };
    if let Some(cpu) = std::env::var(PEER_CPU).ok().and_then(|c| c.parse().ok()) {
        unet::affinity::pin(cpu);
    }
    // SAFETY: the parent passed this descriptor for this purpose, and
    // nothing else in this process knows its number.
    let fd = unsafe { shm::fd_from_env(PEER_FD) }.expect("inherited channel");
    let seg = unet::shm::Segment::map(fd).expect("map the channel");
    let base = seg.as_ptr().as_ptr();
    // SAFETY: the descriptor line lies in the mapping (a channel has its
    // header page, then the line), 4-aligned; atomics are valid for any
    // bits and the mapping outlives these borrows (it drops at the end).
    let (state, word, len) = unsafe {
        (
            &*base.add(LINE).cast::<AtomicU32>(),
            &*base.add(LINE + 4).cast::<AtomicU16>(),
            &*base.add(LINE + 6).cast::<AtomicU16>(),
        )
    };
    loop {
        let s = state.load(Ordering::Acquire);
        let v = s & !(WAITER | REPLY_CLOSED);
        if v == CLOSED || s & REPLY_CLOSED != 0 {
            return;
        }
        if v != REQUEST {
            std::hint::spin_loop();
            continue;
        }
        if word.load(Ordering::Relaxed) == SLOW {
            std::thread::sleep(SLOW_TIME);
        }
        word.store(Status::Ok as u16, Ordering::Relaxed);
        len.store(0, Ordering::Relaxed);
        // The client may set the waiter bit meanwhile: post from what is
        // there, and wake it if it sleeps.
        let mut cur = state.load(Ordering::Relaxed);
        while let Err(now) =
            state.compare_exchange_weak(cur, REPLY, Ordering::Release, Ordering::Relaxed)
        {
            cur = now;
        }
        if cur & WAITER != 0 {
            // SAFETY: FUTEX_WAKE on the state word, a valid aligned u32
            // shared with the client (not FUTEX_PRIVATE: two processes).
            unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    state.as_ptr(),
                    libc::FUTEX_WAKE,
                    1,
                    0usize,
                    0usize,
                    0u32,
                )
            };
        }
    }
}

/// Ends the peer when dropped (the client closes the channel first),
/// then gives back the two CPUs it and its client were pinned to.
struct Peer {
    child: Child,
    _cpus: MutexGuard<'static, ()>,
}

/// Held by every test of this file while it runs (the harness runs tests
/// in parallel): a busy peer and its client are pinned to the two CPUs
/// and need them to themselves. Beside another pair, or the C rule's
/// compile and run, a server is descheduled for much of the time, and a
/// client whose server answers at once sleeps on many calls for a reason
/// that is not its rule (998 of 1,000 in one run beside the C client's
/// pair, 524 in a CI run).
static CPUS: Mutex<()> = Mutex::new(());

/// [`CPUS`], also after a test that failed while it held them.
fn hold_cpus() -> MutexGuard<'static, ()> {
    CPUS.lock().unwrap_or_else(|e| e.into_inner())
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A new channel with the busy peer serving it in a child process pinned
/// to the second of two CPUs; the channel's descriptor and the CPU left
/// for the client.
fn busy_channel() -> (std::os::fd::OwnedFd, Peer, Option<usize>) {
    let cpus_held = hold_cpus();
    let fd = shm::create(&Config {
        area: 4096,
        ..Config::default()
    })
    .expect("channel");
    let cpus = unet::affinity::two_cpus();
    let inherit = shm::inheritable(&fd).expect("inheritable duplicate");
    let mut cmd = Command::new(std::env::current_exe().expect("test executable"));
    cmd.args(["--exact", "busy_peer", "--nocapture", "--test-threads=1"])
        .env(PEER_FD, inherit.as_raw_fd().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    if let Some([_, server]) = cpus {
        cmd.env(PEER_CPU, server.to_string());
    }
    let peer = Peer {
        child: cmd.spawn().expect("spawn the busy peer"),
        _cpus: cpus_held,
    };
    drop(inherit);
    (fd, peer, cpus.map(|[client, _]| client))
}

/// The first field of /proc/loadavg, for the reports.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split(' ').next().map(str::to_string))
        .unwrap_or_else(|| "unknown".into())
}

/// What both clients must show: the slow calls slept (a poll runs out
/// long before the answer; one is answered only if the client's process
/// was descheduled mid-poll for longer than the server took, hence the
/// tenth allowed), and after them few calls slept.
/// With the server always polling, a probe is answered unless the
/// server's process is descheduled at that moment; once one is, the
/// client polls until two polls in a row run out. Half the calls is far
/// above what a loaded machine's preemptions cost, and far below what a
/// rule that probes hundreds of waits apart sleeps (the rule before this
/// test slept on 933 of them).
fn check(client: &str, slow: u64, fast: u64) {
    eprintln!(
        "{client} client: {slow} of {SLOW_CALLS} slow calls and {fast} of {FAST_CALLS} \
         fast calls slept on the futex (load average {})",
        load()
    );
    assert!(
        slow >= SLOW_CALLS - SLOW_CALLS / 10,
        "only {slow} of {SLOW_CALLS} slow calls of the {client} client slept"
    );
    assert!(
        fast <= FAST_CALLS / 2,
        "{fast} of {FAST_CALLS} calls of the {client} client after the slow phase slept \
         on the futex: it did not go back to polling a server that answers at once"
    );
}

#[test]
fn a_rust_client_polls_again_within_a_few_calls_once_its_server_answers_at_once() {
    let (fd, _peer, cpu) = busy_channel();
    let (slow, fast) = std::thread::spawn(move || {
        if let Some(cpu) = cpu {
            unet::affinity::pin(cpu);
        }
        let mut c = ClientEnd::from_fd(fd).expect("client end");
        c.set_timeout(Some(Duration::from_secs(20)));
        for _ in 0..SLOW_CALLS {
            c.call_raw(SLOW, &[]).expect("slow call");
        }
        let before = c.wait_counts().sleeps;
        for _ in 0..FAST_CALLS {
            c.call_raw(2, &[]).expect("fast call");
        }
        let after = c.wait_counts().sleeps;
        c.close();
        (before, after - before)
    })
    .join()
    .expect("client thread");
    check("Rust", slow, fast);
}

#[test]
fn a_c_client_polls_again_within_a_few_calls_once_its_server_answers_at_once() {
    if !have_gcc("a_c_client_polls_again_within_a_few_calls_once_its_server_answers_at_once") {
        return;
    }
    let (fd, _peer, cpu) = busy_channel();
    let inherit = shm::inheritable(&fd).expect("inheritable duplicate");
    drop(fd);
    let out = Command::new(wait_rule_test())
        .arg("client")
        .arg(inherit.as_raw_fd().to_string())
        .arg(cpu.map_or(-1, |c| c as i64).to_string())
        .arg(SLOW_CALLS.to_string())
        .arg(FAST_CALLS.to_string())
        .stdin(Stdio::null())
        .output()
        .expect("run the C client");
    drop(inherit);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the C client failed: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let n: Vec<u64> = text
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    let [slow, fast] = n[..] else {
        panic!("the C client printed {text}");
    };
    check("C", slow, fast);
}
