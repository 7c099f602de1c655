//! Null round trips on `rt::shm` between two threads: ns per call, the
//! best and the median of several batches (on a loaded machine the best
//! batch is one where both threads happened to run; the median is the
//! cost a caller sees). `shm_roundtrip [SPIN]`: `SPIN` is the channel's
//! poll budget (0: futex only, every wait sleeps; default 2000, the
//! library's default, which the adaptive waiting bounds further).
//!
//! Used to compare waiting policies on an idle and on a loaded machine
//! (docs/benchmarks.md, idl section); the benchmark proper is
//! `fastpath bench idl`.

use std::time::Instant;

use idl::rt::shm;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let spin: u32 = match std::env::args().nth(1) {
        Some(a) => a
            .parse()
            .map_err(|_| format!("SPIN must be a number, not '{a}'"))?,
        None => 2000,
    };
    let config = shm::Config {
        spin,
        ..shm::Config::default()
    };
    let (mut client, mut server) = shm::pair(&config)?;
    server.set_spin(spin);
    client.set_spin(spin);
    let t = std::thread::spawn(move || server.serve_raw(|_, _, _| 0));
    const CALLS: u32 = 4000;
    const BATCHES: usize = 7;
    let mut ns_per_call = Vec::with_capacity(BATCHES);
    for b in 0..=BATCHES {
        let start = Instant::now();
        for _ in 0..CALLS {
            client.call_raw(1, &[])?;
        }
        let ns = start.elapsed().as_nanos() as f64 / f64::from(CALLS);
        if b > 0 {
            ns_per_call.push(ns);
        }
    }
    drop(client);
    t.join().map_err(|_| "the server thread panicked")??;
    ns_per_call.sort_by(f64::total_cmp);
    let (best, median) = (ns_per_call[0], ns_per_call[BATCHES / 2]);
    println!(
        "spin {spin}: null round trip {best:.0} ns best, {median:.0} ns median \
         ({BATCHES} batches of {CALLS} calls after a warm-up batch)"
    );
    Ok(())
}
