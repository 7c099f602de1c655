//! Round trips between two processes over the shared-memory channel, and
//! IOzone's reread (Table 3), for every family, interleaved in one run; and
//! null round trips under each waiting policy on an idle and on a loaded
//! machine ([`waiting`]).

use std::hint::black_box;
use std::time::Instant;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use idl::rt::shm::{ClientEnd, Config};

use super::count::TABLE4_INTS;
use super::server::{FILE_BYTES, PfsClient, READ_BYTES};
use super::shm::{Child2, ShmWire, raw_lens};
use super::wire::{KEY_DIRENTRIES, KEY_NULL, KEY_OPEN, KEY_READ, KEY_WRITE};
use super::{capnp_peer, flat_peer, hand, prost_peer};

/// The calls timed, in order.
pub const CALLS: [&str; 4] = ["null", "pfs_open", "pfs_write", "pfs_get_direntries"];

/// How long to measure.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    /// Interleaved rounds; the best is kept.
    pub rounds: usize,
    /// Calls per timed batch.
    pub batch: usize,
    /// IOzone runs (each ten passes over the file) per round.
    pub iozone_runs: usize,
}

impl Budget {
    /// The report's budget (a few seconds per family).
    pub const DEFAULT: Budget = Budget {
        rounds: 7,
        batch: 4000,
        iozone_runs: 5,
    };
    /// A smoke test.
    pub const QUICK: Budget = Budget {
        rounds: 1,
        batch: 200,
        iozone_runs: 1,
    };
}

/// A family in a child process: the raw channel, or a client over it.
pub enum Family {
    /// No stub: `call_raw` with the bytes fastpath's stubs would move.
    Raw(Box<ClientEnd>),
    /// A stub family.
    Stub(Box<dyn PfsClient>),
}

/// A running family and its server child.
pub struct Running {
    /// The family's name.
    pub name: &'static str,
    /// The client side.
    pub family: Family,
    _child: Child2,
    data: Vec<i32>,
    out: Vec<i32>,
    buf: Vec<u8>,
}

/// The families of the timed tables, each with its server child started
/// (pinned to `cpu` if given).
pub fn start_all(cpu: Option<usize>) -> Result<Vec<Running>, String> {
    let mut names: Vec<&'static str> = vec!["raw"];
    if super::fastpath_family::available() {
        names.push("fastpath");
    }
    names.extend(["hand-written", "prost", "capnp", "flatbuffers"]);
    names
        .into_iter()
        .map(|name| start(name, &super::shm::config(), cpu))
        .collect()
}

/// The family `name` with its server child started on a channel of
/// `config` (pinned to `cpu` if given), its results checked.
pub fn start(name: &'static str, config: &Config, cpu: Option<usize>) -> Result<Running, String> {
    let mut child = Child2::spawn_with(name, config, cpu)?;
    let end = child.end.take().ok_or("no client end")?;
    let family = if name == "raw" {
        Family::Raw(Box::new(end))
    } else {
        let c: Box<dyn PfsClient> = match name {
            "fastpath" => super::fastpath_family::shm_client(end)?,
            "hand-written" => Box::new(hand::Client {
                wire: ShmWire { end },
            }),
            "prost" => Box::new(prost_peer::Client {
                wire: ShmWire { end },
            }),
            "capnp" => Box::new(capnp_peer::Client {
                wire: ShmWire { end },
            }),
            _ => Box::new(flat_peer::Client::new(ShmWire { end })),
        };
        Family::Stub(c)
    };
    let mut r = Running {
        name,
        family,
        _child: child,
        data: (0..TABLE4_INTS as i32).collect(),
        out: Vec::new(),
        buf: Vec::with_capacity(READ_BYTES),
    };
    if let Family::Stub(c) = &mut r.family {
        super::server::check(c.as_mut())?;
    }
    Ok(r)
}

impl Running {
    /// One call `k` (index of [`CALLS`]).
    #[inline]
    pub fn call(&mut self, k: usize) -> Result<(), String> {
        match &mut self.family {
            Family::Raw(end) => {
                let key = [KEY_NULL, KEY_OPEN, KEY_WRITE, KEY_DIRENTRIES][k];
                let (req, _) = raw_lens(key);
                let bytes = [0u8; 64];
                let r = end
                    .call_raw(key, &bytes[..req])
                    .map_err(|e| e.to_string())?;
                black_box(r);
            }
            Family::Stub(c) => {
                let r = match k {
                    0 => c.null().map(|_| 0),
                    1 => {
                        let mut h = 0;
                        c.pfs_open(1, 2, 3, 4, &mut h)
                    }
                    2 => {
                        let mut pos = 0;
                        c.pfs_write(5, &mut pos, 6, &self.data)
                    }
                    _ => {
                        let mut pos = 0;
                        c.pfs_get_direntries(5, &mut pos, TABLE4_INTS as i32, &mut self.out)
                    }
                };
                black_box(r.map_err(|e| e.to_string())?);
            }
        }
        Ok(())
    }

    /// Nanoseconds per call of `k` over a batch of `n`.
    pub fn time_call(&mut self, k: usize, n: usize) -> Result<f64, String> {
        let t = Instant::now();
        for _ in 0..n {
            self.call(k)?;
        }
        Ok(t.elapsed().as_nanos() as f64 / n as f64)
    }

    /// One IOzone reread: ten passes over the file in 4 KiB reads; the
    /// seconds it took.
    pub fn iozone(&mut self) -> Result<f64, String> {
        let t = Instant::now();
        for _ in 0..10 {
            for off in (0..FILE_BYTES).step_by(READ_BYTES) {
                match &mut self.family {
                    Family::Raw(end) => {
                        let mut req = [0u8; 12];
                        req[4..8].copy_from_slice(&(off as i32).to_ne_bytes());
                        let r = end.call_raw(KEY_READ, &req).map_err(|e| e.to_string())?;
                        self.buf.clear();
                        self.buf.extend_from_slice(r.get(24..).unwrap_or(&[]));
                    }
                    Family::Stub(c) => {
                        c.read(3, off as i32, READ_BYTES as i32, &mut self.buf)
                            .map_err(|e| e.to_string())?;
                    }
                }
                if self.buf.len() != READ_BYTES {
                    return Err(format!(
                        "{}: read returned {} bytes",
                        self.name,
                        self.buf.len()
                    ));
                }
                black_box(&self.buf);
            }
        }
        Ok(t.elapsed().as_secs_f64())
    }
}

/// IOzone's reread through the kernel: `pread` of the same 64 KiB file on
/// tmpfs (`/dev/shm`), ten passes of 4 KiB reads; seconds per run.
pub fn pread_iozone() -> Result<f64, String> {
    use std::os::unix::fs::FileExt;
    let path = std::path::Path::new("/dev/shm")
        .join(format!("fastpath-idl-iozone-{}", std::process::id()));
    std::fs::write(&path, super::server::test_file())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let f = std::fs::File::open(&path).map_err(|e| e.to_string());
    let _ = std::fs::remove_file(&path);
    let f = f?;
    let mut buf = vec![0u8; READ_BYTES];
    let t = Instant::now();
    for _ in 0..10 {
        for off in (0..FILE_BYTES).step_by(READ_BYTES) {
            let n = f.read_at(&mut buf, off as u64).map_err(|e| e.to_string())?;
            if n != READ_BYTES {
                return Err(format!("pread returned {n} bytes"));
            }
            black_box(&buf);
        }
    }
    Ok(t.elapsed().as_secs_f64())
}

/// Results of the timed part.
#[derive(Clone, Debug)]
pub struct Timed {
    /// The client's and the servers' CPUs, if pinned ([`super::shm::pinning`]).
    pub pinned: Option<(usize, usize)>,
    /// Family names, in order.
    pub names: Vec<&'static str>,
    /// Per family, per call: ns per call of each round's batch.
    pub ns: Vec<Vec<Vec<f64>>>,
    /// Per family: seconds of each IOzone run (ten passes).
    pub iozone: Vec<Vec<f64>>,
    /// `pread` on tmpfs: seconds of each run.
    pub pread: Result<Vec<f64>, String>,
}

/// Times every family, rounds interleaved.
pub fn run(budget: Budget) -> Result<Timed, String> {
    // The client on the first CPU, the servers on the second (`shm::cpus`),
    // unless `FASTPATH_IDL_PIN=0`. Unpinned, the kernel put one or two of
    // the six families' servers on the client's CPU in every quick run on
    // the idle Intel Xeon guest (16 to 19 µs a call, against 200 to 700 ns);
    // with two busy threads beside, both ways measured alike (best of
    // seven: 188 to 228 ns at the null call, raw). Until 2026-12-06 the
    // default was off, chosen when the pin put the servers on the client's
    // CPU (`shm::pinning`).
    let pins = super::shm::pinning(true);
    let old = pins.and_then(|(c, _)| unet::affinity::pin(c));
    // Neither side pinned if the client's pin did not take.
    let r = run_pinned(budget, pins.filter(|_| old.is_some()));
    if let Some(old) = old {
        unet::affinity::restore(&old);
    }
    r
}

fn run_pinned(budget: Budget, pinned: Option<(usize, usize)>) -> Result<Timed, String> {
    let server_cpu = pinned.map(|(_, s)| s);
    let mut fams = start_all(server_cpu)?;
    let mut ns = vec![vec![Vec::new(); CALLS.len()]; fams.len()];
    let mut io = vec![Vec::new(); fams.len()];
    // Warm up.
    for f in &mut fams {
        for k in 0..CALLS.len() {
            f.time_call(k, budget.batch / 4 + 1)?;
        }
        f.iozone()?;
    }
    for _ in 0..budget.rounds {
        for (i, f) in fams.iter_mut().enumerate() {
            for (k, samples) in ns[i].iter_mut().enumerate() {
                // Wake the server (it sleeps on the futex while the others
                // are measured) before the timed batch.
                f.time_call(k, budget.batch / 8 + 1)?;
                samples.push(f.time_call(k, budget.batch)?);
            }
            for _ in 0..budget.iozone_runs {
                io[i].push(f.iozone()?);
            }
        }
    }
    let pread: Result<Vec<f64>, String> = (0..budget.rounds.max(1) * budget.iozone_runs.max(1))
        .map(|_| pread_iozone())
        .collect();
    Ok(Timed {
        pinned,
        names: fams.iter().map(|f| f.name).collect(),
        ns,
        iozone: io,
        pread,
    })
}

/// The waiting policies compared by [`waiting`], in order: the raw channel
/// with `spin` 0 (every wait sleeps on the futex), the raw channel with the
/// default budget (adaptive waiting: docs/idl.md, "Waiting"), and
/// fastpath's generated stubs over the default channel.
pub const POLICIES: [&str; 3] = ["futex-only", "adaptive", "fastpath"];

/// The machine states of [`waiting`], in order.
pub const LOADS: [&str; 2] = ["idle", "loaded"];

/// Null round trips on an idle machine and on one whose every core runs a
/// busy thread.
#[derive(Clone, Debug)]
pub struct Waiting {
    /// Per load, per policy: ns per call of each round's batch (NaN where
    /// the policy did not run, e.g. fastpath's stubs not in the build).
    pub ns: Vec<Vec<Vec<f64>>>,
    /// Busy threads beside the loaded batches: one per CPU.
    pub busy: usize,
    /// Calls per batch, idle and loaded.
    pub batch: [usize; 2],
}

/// Threads that keep every core busy until dropped.
struct Busy {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Busy {
    fn start(n: usize) -> Busy {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..n)
            .map(|_| {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..1000 {
                            x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                        }
                    }
                })
            })
            .collect();
        // Let the scheduler spread them over the cores first.
        std::thread::sleep(Duration::from_millis(20));
        Busy { stop, threads }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Times null calls under each of [`POLICIES`], idle and then with every
/// core busy ([`LOADS`]), `budget.rounds` rounds, each server a child
/// process. A loaded batch is a quarter of an idle one: a futex round
/// trip on a busy machine costs tens of µs.
pub fn waiting(budget: Budget) -> Result<Waiting, String> {
    let futex = Config {
        spin: 0,
        ..super::shm::config()
    };
    // The servers on the second CPU with `FASTPATH_IDL_PIN=1`, the client
    // not pinned; unset, neither: the futex-only policy's figure is then
    // that of the hand-off wherever the kernel puts the two sides.
    let cpu = super::shm::pinning(false).map(|(_, s)| s);
    let mut fams: Vec<Option<Running>> = vec![
        Some(start("raw", &futex, cpu)?),
        Some(start("raw", &super::shm::config(), cpu)?),
        if super::fastpath_family::available() {
            Some(start("fastpath", &super::shm::config(), cpu)?)
        } else {
            None
        },
    ];
    if let Some(Some(Running {
        family: Family::Raw(end),
        ..
    })) = fams.first_mut()
    {
        // The header says 0 too; the end's own budget is set alike.
        end.set_spin(0);
    }
    let busy = std::thread::available_parallelism().map_or(2, |n| n.get());
    let batch = [budget.batch, budget.batch / 4 + 1];
    let mut ns = vec![vec![Vec::new(); POLICIES.len()]; LOADS.len()];
    for f in fams.iter_mut().flatten() {
        f.time_call(0, batch[0] / 4 + 1)?;
    }
    for _ in 0..budget.rounds {
        for (l, per_load) in ns.iter_mut().enumerate() {
            let _load = (l == 1).then(|| Busy::start(busy));
            for (p, f) in fams.iter_mut().enumerate() {
                let Some(f) = f else {
                    per_load[p].push(f64::NAN);
                    continue;
                };
                // Wake the server (it sleeps while the others are timed).
                f.time_call(0, batch[l] / 8 + 1)?;
                per_load[p].push(f.time_call(0, batch[l])?);
            }
        }
    }
    Ok(Waiting { ns, busy, batch })
}
