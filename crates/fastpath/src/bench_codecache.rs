//! `fastpath bench codecache`: the thread-shared code cache against its
//! alternatives, in one process run (figures in `docs/benchmarks.md`).
//!
//! 1. Shared vs private caches with 1 to 64 threads: 2,000 distinct
//!    vcode-generated packet classifiers, each run repeatedly by every
//!    thread. Code and metadata memory, generation time, throughput.
//! 2. Lookup cost at 1 and 2 reader threads, with and without a writer,
//!    against `RwLock<HashMap>`, `Mutex<HashMap>` and `dashmap`; and the
//!    cost of a synchronization point against `crossbeam_epoch::pin`.
//! 3. Promptness of deletion under churn (the paper's Figure 4), with one
//!    thread blocked with and without the system-call flag, against
//!    crossbeam-epoch on the same churn.
//!
//! `CODECACHE_BENCH_SCALE` (default 1.0) scales every duration and count;
//! `--quick` runs at a scale of 0.05 (half-second churns, 1 to 8 threads).
//! Each figure is one timed run (the sample count each section states); a
//! time at or below a twentieth of a cycle per operation is n/a with the
//! reason (see [`crate::bench_figures`]), and so is a ratio over it.

use codecache::{CodeCache, Config, Emit, Sharing};
use std::collections::HashMap;
use std::hint::black_box;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex, RwLock};
use std::time::{Duration, Instant};
use vcode::{Class, Code, Func, I, Leaf, P};

use crate::bench_figures::{Figure, MIN_NS_PER_OP, best_figure, ratio};
use crate::bench_report::{Cell, Fmt, Report, Section, col};

const FUNCTIONS: u64 = 2000;
const FIELDS: i64 = 8;
const PACKET: usize = 64;

/// The scale of `--quick`.
const QUICK_SCALE: f64 = 0.05;

fn scale(quick: bool) -> f64 {
    if quick {
        return QUICK_SCALE;
    }
    std::env::var("CODECACHE_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0)
}

/// One timed run's figure: a value above `resolution`, or why not.
fn once(x: f64, resolution: f64) -> Figure {
    best_figure(&[x], 1, resolution)
}

/// The constant that classifier `key` expects in 16-bit field `j`.
fn field(key: u64, j: i64) -> i64 {
    ((key as i64).wrapping_mul(2_654_435_761) >> (j * 3)) & 0xffff
}

/// A dpf-style classifier: `int f(const u8 *pkt, int len)` returns
/// `key + 1` when the packet is long enough and its eight 16-bit fields
/// hold the key's constants, else 0.
fn classifier(
    key: u64,
    gen_ns: &AtomicU64,
) -> impl FnMut(&mut Emit<'_>) -> Result<Code, vcode::Error> + '_ {
    move |e| {
        let t0 = thread_cpu_ns();
        let mut f = Func::new();
        let p = f.lambda("%p%i", Leaf::Yes)?;
        let (pkt, len) = (p.get::<P>(0)?, p.get::<I>(1)?);
        let t = f.getreg::<I>(Class::Temp)?;
        let fail = f.genlabel();
        f.blt(len, PACKET as i32, fail);
        for j in 0..FIELDS {
            f.ldus(t, pkt, 2 * j);
            f.bne(t, field(key, j) as i32, fail);
        }
        f.set(t, key as i32 + 1);
        f.ret(t);
        f.label(fail);
        f.set(t, 0);
        f.ret(t);
        let code = f.end_in(e.mem());
        gen_ns.fetch_add(thread_cpu_ns() - t0, Ordering::Relaxed);
        code
    }
}

/// CPU time of the calling thread, in ns: generation cost that does not
/// count time spent descheduled (64 threads share 2 cores).
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a
    // constant the kernel supports.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(r, 0, "clock_gettime");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Wall time from the first start to the last end of per-thread spans.
fn span(v: &[(Instant, Instant)]) -> Duration {
    let start = v.iter().map(|x| x.0).min().unwrap();
    let end = v.iter().map(|x| x.1).max().unwrap();
    end - start
}

/// A packet that classifier `key` accepts.
fn packet_for(key: u64) -> [u8; PACKET] {
    let mut p = [0u8; PACKET];
    for j in 0..FIELDS {
        let v = field(key, j) as u16;
        p[2 * j as usize..2 * j as usize + 2].copy_from_slice(&v.to_le_bytes());
    }
    p
}

type Classify = extern "C" fn(*const u8, i32) -> i32;

struct SharingRow {
    code: usize,
    meta: usize,
    gen_ms: f64,
    warm_ms: f64,
    calls_per_s: f64,
}

fn sharing_run(sharing: Sharing, threads: usize, passes: usize) -> SharingRow {
    let cfg = Config {
        sharing,
        ..Config::with_capacity(64 << 20)
    };
    let cache = Arc::new(CodeCache::new(cfg));
    let gen_ns = Arc::new(AtomicU64::new(0));
    let barrier = Arc::new(Barrier::new(threads));
    let accepted = Arc::new(AtomicU64::new(0));
    let mut hs = Vec::new();
    for t in 0..threads {
        let (cache, gen_ns, barrier, accepted) = (
            cache.clone(),
            gen_ns.clone(),
            barrier.clone(),
            accepted.clone(),
        );
        hs.push(std::thread::spawn(move || {
            let mut me = cache.register();
            let pkt = packet_for(t as u64 % FUNCTIONS);
            barrier.wait();
            // Warm-up pass: every thread needs every function (in private
            // mode each thread generates its own copy).
            let w0 = Instant::now();
            {
                let s = me.enter();
                for k in 0..FUNCTIONS {
                    let k = (k + t as u64 * 7) % FUNCTIONS;
                    s.get_or_build(k, 0, classifier(k, &gen_ns)).unwrap();
                }
            }
            let w1 = Instant::now();
            barrier.wait();
            let r0 = Instant::now();
            let mut acc = 0u64;
            for _ in 0..passes {
                let s = me.enter();
                for k in 0..FUNCTIONS {
                    let e = s.lookup(k).unwrap();
                    // SAFETY: the classifier reads 16 bytes of the 64-byte
                    // packet it is given; called inside the scope.
                    let f: Classify = unsafe { e.code().as_fn() }.unwrap();
                    acc += (f(pkt.as_ptr(), PACKET as i32) != 0) as u64;
                }
            }
            let r1 = Instant::now();
            accepted.fetch_add(acc, Ordering::Relaxed);
            // Stats while every thread is still registered.
            let st = (t == 0).then(|| cache.stats());
            barrier.wait();
            drop(me);
            ((w0, w1), (r0, r1), st)
        }));
    }
    let mut warm = Vec::new();
    let mut run = Vec::new();
    let mut st = None;
    for h in hs {
        let (w, r, s) = h.join().unwrap();
        warm.push(w);
        run.push(r);
        st = st.or(s);
    }
    let st = st.unwrap();
    let (warm, run) = (span(&warm), span(&run));
    // Each thread's packet matches exactly its own classifier.
    assert_eq!(
        accepted.load(Ordering::Relaxed),
        (threads * passes) as u64,
        "wrong classifications"
    );
    SharingRow {
        code: st.bytes_mapped,
        meta: st.metadata_bytes,
        gen_ms: gen_ns.load(Ordering::Relaxed) as f64 / 1e6,
        warm_ms: warm.as_secs_f64() * 1e3,
        calls_per_s: (threads * passes) as f64 * FUNCTIONS as f64 / run.as_secs_f64(),
    }
}

fn bench_sharing(scale: f64, quick: bool) -> Section {
    let mut s = Section::new(
        "sharing",
        &format!("1. Shared vs private: {FUNCTIONS} classifiers, every thread runs each"),
        "threads",
        vec![
            col("shared_code_kib", "shared code KiB", Fmt::Dec(0)),
            col("private_code_kib", "private code KiB", Fmt::Dec(0)),
            col("shared_meta_kib", "shared meta KiB", Fmt::Dec(0)),
            col("private_meta_kib", "private meta KiB", Fmt::Dec(0)),
            col(
                "private_over_shared_memory",
                "private/shared memory",
                Fmt::Times,
            ),
            col(
                "shared_generation_cpu_ms",
                "generation CPU ms shared",
                Fmt::Dec(1),
            ),
            col(
                "private_generation_cpu_ms",
                "generation CPU ms private",
                Fmt::Dec(1),
            ),
            col(
                "shared_warmup_wall_ms",
                "warm-up wall ms shared",
                Fmt::Dec(1),
            ),
            col(
                "private_warmup_wall_ms",
                "warm-up wall ms private",
                Fmt::Dec(1),
            ),
            col("shared_mcalls_per_s", "Mcalls/s shared", Fmt::Dec(1)),
            col("private_mcalls_per_s", "Mcalls/s private", Fmt::Dec(1)),
        ],
    );
    s.samples = Some(1);
    s.about = "One run per cell: code and metadata memory after every thread has used every \
               classifier; generation CPU time over all threads; warm-up and call rate in wall time."
        .into();
    let threads: &[usize] = if quick {
        &[1, 2, 8]
    } else {
        &[1, 2, 4, 8, 16, 64]
    };
    for &threads in threads {
        eprintln!("codecache: sharing, {threads} threads");
        let passes = ((2000.0 * scale) as usize / threads).max(10);
        let sh = sharing_run(Sharing::Shared, threads, passes);
        let p = sharing_run(Sharing::Private, threads, passes);
        let kib = |b: usize| Cell::Int((b / 1024) as i64);
        let mem = |b: usize| Figure::Value {
            value: b as f64,
            spread: 0.0,
        };
        // Times of at least a clock step (1 µs here, in ms).
        let ms = |x: f64| Cell::Fig(once(x, 1e-3));
        let rate = |x: f64| Cell::Fig(once(x / 1e6, 0.0));
        s.row(
            threads.to_string(),
            vec![
                kib(sh.code),
                kib(p.code),
                kib(sh.meta),
                kib(p.meta),
                Cell::Fig(ratio(&mem(p.code + p.meta), &mem(sh.code + sh.meta))),
                ms(sh.gen_ms),
                ms(p.gen_ms),
                ms(sh.warm_ms),
                ms(p.warm_ms),
                rate(sh.calls_per_s),
                rate(p.calls_per_s),
            ],
        );
    }
    s
}

/// One lookup structure under test: `get` returns the code address.
trait Lookup: Send + Sync + 'static {
    fn name(&self) -> &'static str;
    /// Runs `n` lookups of pseudo-random keys on this thread; returns a
    /// checksum. Readers of the lock-free table enter a scope per 64.
    fn read(&self, n: usize, seed: u64) -> u64;
    /// One replacement of a random key's value.
    fn write(&self, i: u64);
}

fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x % FUNCTIONS
}

struct Locked<M>(M);

impl Lookup for Locked<RwLock<HashMap<u64, Arc<usize>>>> {
    fn name(&self) -> &'static str {
        "RwLock<HashMap>"
    }
    fn read(&self, n: usize, mut seed: u64) -> u64 {
        let mut acc = 0;
        for _ in 0..n {
            let g = self.0.read().unwrap();
            acc += **g.get(&next(&mut seed)).unwrap() as u64;
        }
        acc
    }
    fn write(&self, i: u64) {
        self.0
            .write()
            .unwrap()
            .insert(i % FUNCTIONS, Arc::new(i as usize));
    }
}

impl Lookup for Locked<Mutex<HashMap<u64, Arc<usize>>>> {
    fn name(&self) -> &'static str {
        "Mutex<HashMap>"
    }
    fn read(&self, n: usize, mut seed: u64) -> u64 {
        let mut acc = 0;
        for _ in 0..n {
            let g = self.0.lock().unwrap();
            acc += **g.get(&next(&mut seed)).unwrap() as u64;
        }
        acc
    }
    fn write(&self, i: u64) {
        self.0
            .lock()
            .unwrap()
            .insert(i % FUNCTIONS, Arc::new(i as usize));
    }
}

impl Lookup for Locked<dashmap::DashMap<u64, Arc<usize>>> {
    fn name(&self) -> &'static str {
        "dashmap"
    }
    fn read(&self, n: usize, mut seed: u64) -> u64 {
        let mut acc = 0;
        for _ in 0..n {
            acc += **self.0.get(&next(&mut seed)).unwrap() as u64;
        }
        acc
    }
    fn write(&self, i: u64) {
        self.0.insert(i % FUNCTIONS, Arc::new(i as usize));
    }
}

/// The cache's table and delayed deletion, as `Scope::lookup` uses them.
struct Table {
    map: codecache::table::Map<usize>,
}

impl Lookup for Table {
    fn name(&self) -> &'static str {
        "codecache table"
    }
    fn read(&self, n: usize, mut seed: u64) -> u64 {
        let rec = self.map.reclaimer();
        let mut me = rec.register();
        let mut acc = 0;
        for _ in 0..n / 64 {
            let g = rec.enter(&mut me);
            for _ in 0..64 {
                acc += *self.map.get(next(&mut seed), &g).unwrap() as u64;
            }
        }
        rec.unregister(&me);
        acc
    }
    fn write(&self, i: u64) {
        // The replaced value is retired when dropped.
        drop(self.map.insert(i % FUNCTIONS, Box::new(i as usize)));
    }
}

/// ns per lookup with `readers` threads, with or without a writer thread.
fn lookup_ns(l: Arc<dyn Lookup>, readers: usize, writer: bool, n: usize) -> f64 {
    for i in 0..FUNCTIONS {
        l.write(i);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let w = writer.then(|| {
        let (l, stop) = (l.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                l.write(i * 7919);
                i += 1;
            }
        })
    });
    let barrier = Arc::new(Barrier::new(readers));
    let hs: Vec<_> = (0..readers)
        .map(|r| {
            let (l, barrier) = (l.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                let t0 = Instant::now();
                black_box(l.read(n, 0x9e37_79b9 + r as u64));
                t0.elapsed()
            })
        })
        .collect();
    let per: Vec<Duration> = hs.into_iter().map(|h| h.join().unwrap()).collect();
    stop.store(true, Ordering::Relaxed);
    if let Some(w) = w {
        w.join().unwrap();
    }
    let total: Duration = per.iter().sum();
    total.as_secs_f64() * 1e9 / (n * readers) as f64
}

fn bench_lookup(scale: f64) -> Section {
    let n = ((2_000_000.0 * scale) as usize).max(64 * 64);
    let mut s = Section::new(
        "lookup",
        "2. Lookup cost (ns per lookup, per reader thread; lower is better)",
        "structure",
        vec![
            col("one_reader_ns", "1 reader", Fmt::Dec(1)),
            col("two_readers_ns", "2 readers", Fmt::Dec(1)),
            col("one_reader_writer_ns", "1 reader + writer", Fmt::Dec(1)),
            col("two_readers_writer_ns", "2 readers + writer", Fmt::Dec(1)),
        ],
    );
    s.samples = Some(1);
    s.about = format!("{n} lookups per reader per cell, one run each.");
    let makers: Vec<Box<dyn Fn() -> Arc<dyn Lookup>>> = vec![
        Box::new(|| {
            Arc::new(Table {
                map: codecache::table::Map::new(Arc::new(codecache::deletion::Reclaimer::new())),
            })
        }),
        Box::new(|| Arc::new(Locked(RwLock::new(HashMap::new())))),
        Box::new(|| Arc::new(Locked(Mutex::new(HashMap::new())))),
        Box::new(|| Arc::new(Locked(dashmap::DashMap::new()))),
    ];
    let mut rows = Vec::new();
    for make in &makers {
        let name = make().name();
        eprintln!("codecache: lookup, {name}");
        let cells: Vec<Figure> = [(1, false), (2, false), (1, true), (2, true)]
            .iter()
            .map(|&(r, w)| once(lookup_ns(make(), r, w, n), MIN_NS_PER_OP))
            .collect();
        s.row(name, cells.iter().cloned().map(Cell::Fig).collect());
        rows.push((name, cells));
    }
    let ours = &rows[0].1;
    let rw = &rows[1].1;
    s.lines.push(format!(
        "RwLock<HashMap> / codecache table: {} (2 readers), {} (2 readers + writer)",
        ratio(&rw[1], &ours[1]).cell(|x| format!("{x:.1}x")),
        ratio(&rw[3], &ours[3]).cell(|x| format!("{x:.1}x"))
    ));
    // A whole Scope::lookup through the cache (enter and exit per lookup:
    // the worst case), and the synchronization point against crossbeam's pin.
    let cache = CodeCache::new(Config::default());
    let gen_ns = AtomicU64::new(0);
    for k in 0..FUNCTIONS {
        cache.publish(k, 0, classifier(k, &gen_ns)).unwrap();
    }
    let mut me = cache.register();
    let mut seed = 12345u64;
    let t0 = Instant::now();
    let mut acc = 0usize;
    for _ in 0..n {
        let s = me.enter();
        acc += s.lookup(next(&mut seed)).unwrap().code().addr();
    }
    black_box(acc);
    let scoped = t0.elapsed().as_secs_f64() * 1e9 / n as f64;
    let t0 = Instant::now();
    for _ in 0..n {
        drop(black_box(me.enter()));
    }
    let sync = t0.elapsed().as_secs_f64() * 1e9 / n as f64;
    let t0 = Instant::now();
    for _ in 0..n {
        drop(black_box(crossbeam_epoch::pin()));
    }
    let pin = t0.elapsed().as_secs_f64() * 1e9 / n as f64;
    let ns = |x: f64| once(x, MIN_NS_PER_OP).cell(|v| format!("{v:.1} ns"));
    s.lines.push(format!(
        "CodeCache enter + lookup + exit: {}; empty scope (two synchronization points): {}; crossbeam_epoch::pin + unpin: {}",
        ns(scoped),
        ns(sync),
        ns(pin)
    ));
    s
}

/// Churn with one blocked thread; returns the fraction of unlinked blocks
/// freed within 1, 10, 100, 1000 ms.
fn promptness_codecache(flag: bool, secs: f64) -> ([f64; 4], u64) {
    let cache = Arc::new(CodeCache::new(Config::with_capacity(64 << 20)));
    let gen_ns = Arc::new(AtomicU64::new(0));
    let keys = 200;
    for k in 0..keys {
        cache.publish(k, 0, classifier(k, &gen_ns)).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut hs = Vec::new();
    // A running thread: a synchronization point far more often than 1 ms.
    {
        let (cache, stop) = (cache.clone(), stop.clone());
        hs.push(std::thread::spawn(move || {
            let mut me = cache.register();
            let pkt = packet_for(0);
            let mut k = 0;
            while !stop.load(Ordering::Relaxed) {
                let s = me.enter();
                for _ in 0..16 {
                    k = (k + 1) % keys;
                    if let Some(e) = s.lookup(k) {
                        // SAFETY: as in `sharing_run`.
                        let f: Classify = unsafe { e.code().as_fn() }.unwrap();
                        black_box(f(pkt.as_ptr(), PACKET as i32));
                    }
                }
            }
        }));
    }
    // The blocked thread: 500 ms blocking sleeps, flagged out or not.
    {
        let (cache, stop) = (cache.clone(), stop.clone());
        hs.push(std::thread::spawn(move || {
            let mut me = cache.register();
            while !stop.load(Ordering::Relaxed) {
                let nap = || std::thread::sleep(Duration::from_millis(500));
                if flag {
                    me.blocking(nap);
                } else {
                    nap();
                }
                drop(me.enter());
            }
        }));
    }
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let mut v = 1;
    while Instant::now() < deadline {
        for k in 0..keys {
            cache.publish(k, v, classifier(k, &gen_ns)).unwrap();
        }
        v += 1;
        std::thread::sleep(Duration::from_micros(200));
    }
    // Histogram before the threads leave (their exit frees the rest); sets
    // still pending count as not freed within any limit.
    let st = cache.stats();
    let h = st.deletion_delay;
    stop.store(true, Ordering::Relaxed);
    for t in hs {
        t.join().unwrap();
    }
    let retired = st.retired_sets.max(1) as f64;
    let f = [1, 10, 100, 1000]
        .map(|ms| h.fraction_within(Duration::from_millis(ms)) * h.count() as f64 / retired);
    (f, h.count())
}

/// The same churn on crossbeam-epoch: the publisher defers the drop of each
/// replaced value, and the drop records how long it waited.
fn promptness_epoch(unpinned_while_blocked: bool, secs: f64) -> ([f64; 4], u64) {
    use crossbeam_epoch::{self as epoch, Atomic, Owned};
    struct Stamped(Instant, Arc<Mutex<Vec<Duration>>>);
    impl Drop for Stamped {
        fn drop(&mut self) {
            self.1.lock().unwrap().push(self.0.elapsed());
        }
    }
    let delays = Arc::new(Mutex::new(Vec::new()));
    let keys = 200usize;
    let slots: Arc<Vec<Atomic<Stamped>>> = Arc::new(
        (0..keys)
            .map(|_| Atomic::new(Stamped(Instant::now(), delays.clone())))
            .collect(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let mut hs = Vec::new();
    {
        let (slots, stop) = (slots.clone(), stop.clone());
        hs.push(std::thread::spawn(move || {
            let mut k = 0;
            while !stop.load(Ordering::Relaxed) {
                let g = epoch::pin();
                for _ in 0..16 {
                    k = (k + 1) % keys;
                    black_box(slots[k].load(Ordering::Acquire, &g).is_null());
                }
            }
        }));
    }
    {
        let stop = stop.clone();
        hs.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if unpinned_while_blocked {
                    std::thread::sleep(Duration::from_millis(500));
                } else {
                    let g = epoch::pin();
                    std::thread::sleep(Duration::from_millis(500));
                    drop(g);
                }
            }
        }));
    }
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let mut retired = 0u64;
    while Instant::now() < deadline {
        retired += keys as u64;
        for s in slots.iter() {
            let g = epoch::pin();
            let old = s.swap(
                Owned::new(Stamped(Instant::now(), delays.clone())),
                Ordering::AcqRel,
                &g,
            );
            // SAFETY: `old` was just unlinked from its slot; readers that
            // loaded it are pinned, which the deferred drop waits for.
            unsafe { g.defer_destroy(old) };
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    let d = delays.lock().unwrap().clone();
    stop.store(true, Ordering::Relaxed);
    for t in hs {
        t.join().unwrap();
    }
    // Values still waiting at the end count as not freed within any limit.
    let retired = retired.max(1) as f64;
    let f = [1, 10, 100, 1000]
        .map(|ms| d.iter().filter(|x| **x < Duration::from_millis(ms)).count() as f64 / retired);
    (f, d.len() as u64)
}

fn bench_promptness(scale: f64) -> Section {
    let secs = (3.0 * scale).max(0.5);
    let mut s = Section::new(
        "promptness",
        &format!(
            "3. Promptness of deletion under churn ({secs:.1} s each; one thread blocked in 500 ms sleeps)"
        ),
        "scheme",
        vec![
            col("freed_within_1ms_percent", "freed ≤ 1 ms", Fmt::Percent(2)),
            col("freed_within_10ms_percent", "≤ 10 ms", Fmt::Percent(2)),
            col("freed_within_100ms_percent", "≤ 100 ms", Fmt::Percent(2)),
            col("freed_within_1000ms_percent", "≤ 1000 ms", Fmt::Percent(2)),
            col("sets_freed", "sets freed", Fmt::Dec(0)),
        ],
    );
    s.samples = Some(1);
    s.about =
        "Share of the replaced code (sets of blocks) freed within each delay of its unlinking; \
               sets still pending at the end count as not freed."
            .into();
    let mut row = |name: &str, (f, n): ([f64; 4], u64)| {
        let pct = |x: f64| {
            Cell::Fig(Figure::Value {
                value: x * 100.0,
                spread: 0.0,
            })
        };
        s.row(
            name,
            vec![
                pct(f[0]),
                pct(f[1]),
                pct(f[2]),
                pct(f[3]),
                Cell::Int(n as i64),
            ],
        );
    };
    eprintln!("codecache: promptness");
    row(
        "codecache, blocked thread flagged out",
        promptness_codecache(true, secs),
    );
    row(
        "codecache, blocked thread not flagged",
        promptness_codecache(false, secs),
    );
    row(
        "crossbeam-epoch, blocked thread unpinned",
        promptness_epoch(true, secs),
    );
    row(
        "crossbeam-epoch, blocked thread pinned",
        promptness_epoch(false, secs),
    );
    s
}

/// Runs the suite and prints the report.
pub fn run(json: bool, quick: bool) -> ExitCode {
    let scale = scale(quick);
    let mut r = Report::new(
        "codecache",
        quick,
        format!(
            "fastpath bench codecache ({} cores available)",
            std::thread::available_parallelism().map_or(1, |n| n.get())
        ),
    );
    let only = std::env::var("CODECACHE_BENCH_ONLY").unwrap_or_default();
    if only.is_empty() || only == "lookup" {
        r.sections.push(bench_lookup(scale));
    }
    if only.is_empty() || only == "promptness" {
        r.sections.push(bench_promptness(scale));
    }
    if only.is_empty() || only == "sharing" {
        r.sections.push(bench_sharing(scale, quick));
    }
    match r.print(json) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fastpath bench codecache: {e}");
            if json {
                crate::print_json_error("bench codecache", &e);
            }
            ExitCode::FAILURE
        }
    }
}
