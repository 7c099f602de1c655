//! Every random interface of the build, called with random values over the
//! shared-memory channel (`idl::rt::shm`, client and server in two
//! threads): the server sees exactly the client's in and inout values, and
//! the client gets exactly the server's inout, out and return values.
//!
//! Environment: `IDL_PROPTEST_RUN_SEED` (the values; the interfaces'
//! seed is the build's, `IDL_PROPTEST_SEED`), `IDL_PROPTEST_CALLS` (calls
//! per interface), `IDL_PROPTEST_ONLY` (one interface by name). A failure
//! names the interface, its IDL file, the call and the value that differs,
//! and the seeds that reproduce it.

use idl_proptest::{BUILD_SEED, CASES, Case, Rng};
use std::sync::mpsc;
use std::time::Duration;

const DEFAULT_RUN_SEED: u64 = 0x5eed_ca11;
const DEFAULT_CALLS: usize = 200;

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    let v = v.trim().replace('_', "");
    let n = match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => v.parse(),
    };
    Some(n.unwrap_or_else(|e| panic!("{name}={v:?} is not a number: {e}")))
}

/// The seeds of one run, and how to repeat it.
struct Run {
    seed: u64,
    calls: usize,
}

impl Run {
    fn from_env() -> Run {
        Run {
            seed: env_u64("IDL_PROPTEST_RUN_SEED").unwrap_or(DEFAULT_RUN_SEED),
            calls: env_u64("IDL_PROPTEST_CALLS").map_or(DEFAULT_CALLS, |n| n as usize),
        }
    }

    fn cases(&self) -> impl Iterator<Item = (usize, &'static Case)> {
        let only = std::env::var("IDL_PROPTEST_ONLY").ok();
        CASES
            .iter()
            .enumerate()
            .filter(move |(_, c)| only.as_deref().is_none_or(|o| o == c.name))
    }

    /// The client's and the server's seeds for interface `i`.
    fn seeds(&self, i: usize) -> (u64, u64) {
        let mut r = Rng::fork(self.seed, i as u64);
        (r.next_u64(), r.next_u64())
    }

    fn reproduce(&self, case: &Case, over: &Transport) -> String {
        format!(
            "reproduce with: IDL_PROPTEST_SEED={BUILD_SEED:#x} IDL_PROPTEST_RUN_SEED={:#x} \
             IDL_PROPTEST_CALLS={} IDL_PROPTEST_ONLY={} \
             cargo test --release -p idl-proptest --test random_interfaces {}",
            self.seed, self.calls, case.name, over.test
        )
    }

    /// Runs the selected interfaces over a transport; panics with a
    /// report of each failure.
    fn over(&self, over: &Transport) {
        let mut failures = Vec::new();
        let mut ran = 0;
        for (i, case) in self.cases().filter(|(i, _)| i % over.every == 0) {
            ran += 1;
            let (client_seed, server_seed) = self.seeds(i);
            let calls = self.calls.div_ceil(over.fewer);
            if let Err(e) = run_one(
                case,
                (over.pair)(),
                client_seed,
                server_seed,
                calls,
                over.lim,
            ) {
                failures.push(format!(
                    "{} over {}: {e}\n  IDL: {}\n  {}",
                    case.name,
                    over.name,
                    case.idl_path,
                    self.reproduce(case, over)
                ));
            }
        }
        if std::env::var("IDL_PROPTEST_ONLY").is_ok() && ran == 0 {
            eprintln!(
                "IDL_PROPTEST_ONLY names no interface this test runs over {}",
                over.name
            );
        }
        assert!(
            failures.is_empty(),
            "{} of {ran} random interfaces failed over {}:\n{}",
            failures.len(),
            over.name,
            failures.join("\n")
        );
    }
}

/// A connected client and server, the server to be moved to its thread.
type Pair = (
    Box<dyn idl::rt::ClientTransport>,
    Box<dyn idl::rt::ServerTransport + Send>,
);

/// A transport the interfaces run over.
struct Transport {
    /// For reports.
    name: &'static str,
    /// The test that runs it (to reproduce a failure).
    test: &'static str,
    /// Every `every`-th interface runs over it.
    every: usize,
    /// With `calls / fewer` calls each.
    fewer: usize,
    /// The client's strings and sequences have at most `lim` bytes (the
    /// channel's per-string limit, or less where the area is small).
    lim: usize,
    /// A connected client and server.
    pair: fn() -> Pair,
}

/// One interface: the server in a thread, `calls` random calls from this
/// one, then the client hangs up and the server's loop must end cleanly.
fn run_one(
    case: &Case,
    (mut client, mut server): Pair,
    client_seed: u64,
    server_seed: u64,
    calls: usize,
    lim: usize,
) -> Result<(), String> {
    let (tx, rx) = mpsc::channel();
    let serve = case.serve;
    let server = std::thread::spawn(move || serve(&mut *server, server_seed, tx));
    let driven = (case.drive)(&mut *client, client_seed, calls, lim, &rx);
    drop(client);
    let served = server.join();
    driven?;
    match served {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(format!("the server loop failed after the calls: {e}")),
        Err(_) => Err("the server thread panicked".into()),
    }
}

/// The shared-memory channel: the default limits (2 MiB a string), a string
/// area of 16 strings at the limit (out strings share what the in strings
/// leave in equal parts), a timeout so that a lost wake-up fails rather
/// than hangs.
fn shm_pair() -> Pair {
    let (mut c, s) =
        idl::rt::shm::pair(&idl_proptest::channel_config()).expect("a shared-memory channel");
    c.set_timeout(Some(Duration::from_secs(60)));
    (Box::new(c), Box::new(s))
}

/// Bytes of one string over unet: every message carries its strings, and a
/// message must fit the endpoint's buffers.
const UNET_STRING: usize = 2048;

/// unet's channel between two engines on an in-process loop network.
fn unet_pair() -> Pair {
    let mut config = idl::rt::unet::Config::default();
    config.limits.max_string_bytes = UNET_STRING as u32;
    let (mut c, s) = idl::rt::unet::loop_pair(&config).expect("a unet channel");
    c.set_timeout(Some(Duration::from_secs(60)));
    (Box::new(c), Box::new(s))
}

#[test]
fn random_interfaces_over_shm() {
    Run::from_env().over(&Transport {
        name: "rt::shm",
        test: "random_interfaces_over_shm",
        every: 1,
        fewer: 1,
        lim: idl_proptest::max_string_bytes(),
        pair: shm_pair,
    });
}

#[test]
fn random_interfaces_over_unet() {
    Run::from_env().over(&Transport {
        name: "rt::unet (loop network)",
        test: "random_interfaces_over_unet",
        every: 4,
        fewer: 4,
        lim: UNET_STRING,
        pair: unet_pair,
    });
}
