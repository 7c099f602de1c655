//! The experiment of the paper's Table 4, shared by `fastpath bench ilp`,
//! `fastpath ilp demo` and `benches/table4.rs`: three pipelines (copy +
//! checksum, copy + checksum + byte swap, copy + CRC-32), each done three
//! ways (separate passes of the reference steps, with `crc32fast` for the
//! CRC; a loop fused by hand in Rust; the ilp-generated loop), over data in
//! the cache (one buffer used again and again) and out of it (a working set
//! many times the last-level cache, cycled through buffer by buffer), all
//! in one process run, interleaved, so that the ratios compare like with
//! like.

use std::hint::black_box;
use std::time::{Duration, Instant};

use crate::{Pipeline, State, Step, Stores, Vectors, handfused, reference};

/// One of the three pipelines of the table.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Workload {
    /// Copy and Internet checksum.
    CopyChecksum,
    /// Copy, checksum, and a 32-bit byte swap of the copied data.
    CopyChecksumBswap,
    /// Copy and CRC-32.
    CopyCrc32,
}

impl Workload {
    /// All three, in table order.
    pub const ALL: [Workload; 3] = [
        Workload::CopyChecksum,
        Workload::CopyChecksumBswap,
        Workload::CopyCrc32,
    ];

    /// The row label.
    pub fn name(self) -> &'static str {
        match self {
            Workload::CopyChecksum => "copy+checksum",
            Workload::CopyChecksumBswap => "copy+checksum+bswap32",
            Workload::CopyCrc32 => "copy+crc32",
        }
    }

    /// The ilp step list.
    pub fn steps(self) -> Vec<Step> {
        match self {
            Workload::CopyChecksum => vec![Step::Copy, Step::Checksum],
            Workload::CopyChecksumBswap => vec![Step::Copy, Step::Checksum, Step::Bswap32],
            Workload::CopyCrc32 => vec![Step::Copy, Step::Crc32],
        }
    }
}

/// The three ways of doing a workload.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Method {
    /// One pass per step: `copy_from_slice`, then the reference checksum
    /// and byte swap over the copy, or `crc32fast` (PCLMULQDQ-folded) for
    /// the CRC.
    Separate,
    /// [`handfused`]: one Rust loop per workload, written by hand.
    HandFused,
    /// The [`Pipeline`] of the workload's steps, as [`Pipeline::run`]
    /// runs it (non-temporal stores from [`NT_MIN_LEN`](crate::NT_MIN_LEN)
    /// bytes on).
    Ilp,
    /// The same pipeline with non-temporal stores at every length
    /// ([`Stores::NonTemporal`]): what a caller that knows its data
    /// streams through (many buffers, none read back soon) would ask for.
    IlpNt,
}

impl Method {
    /// All four.
    pub const ALL: [Method; 4] = [
        Method::Separate,
        Method::HandFused,
        Method::Ilp,
        Method::IlpNt,
    ];
}

/// One workload done one way: returns the observed value (checksum sum
/// or CRC) so that the methods can be checked against each other and the
/// work cannot be optimized away.
pub struct Runner {
    workload: Workload,
    pipeline: Pipeline,
}

impl Runner {
    /// The runner of `workload` (compiles its pipeline).
    pub fn new(workload: Workload) -> Runner {
        Runner::with_vectors(workload, Vectors::Widest)
    }

    /// The runner of `workload`, its pipeline's loops no wider than
    /// `vectors` (see [`Pipeline::with_vectors`]).
    pub fn with_vectors(workload: Workload, vectors: Vectors) -> Runner {
        let pipeline = Pipeline::with_vectors(&workload.steps(), vectors)
            .expect("the table's step lists are valid");
        Runner { workload, pipeline }
    }

    /// The workload's name.
    pub fn pipeline_name(&self) -> &'static str {
        self.workload.name()
    }

    /// The compiled pipeline.
    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    /// Processes one message `src` into `dst` with `method`.
    #[inline]
    pub fn once(&self, method: Method, src: &[u8], dst: &mut [u8]) -> u32 {
        match (method, self.workload) {
            (Method::Separate, Workload::CopyChecksum) => {
                reference::copy(src, dst);
                let mut st = State::new();
                reference::checksum(&mut st, dst);
                st.sum as u32
            }
            (Method::Separate, Workload::CopyChecksumBswap) => {
                reference::copy(src, dst);
                let mut st = State::new();
                reference::checksum(&mut st, dst);
                reference::bswap32(dst);
                st.sum as u32
            }
            (Method::Separate, Workload::CopyCrc32) => {
                reference::copy(src, dst);
                crc32fast::hash(dst)
            }
            (Method::HandFused, Workload::CopyChecksum) => {
                let mut st = State::new();
                st.absorb_sum(handfused::copy_checksum(src, dst));
                st.sum as u32
            }
            (Method::HandFused, Workload::CopyChecksumBswap) => {
                let mut st = State::new();
                st.absorb_sum(handfused::copy_checksum_bswap32(src, dst));
                st.sum as u32
            }
            (Method::HandFused, Workload::CopyCrc32) => handfused::copy_crc32(src, dst, 0),
            (Method::Ilp | Method::IlpNt, _) => {
                let mut st = State::new();
                let stores = if method == Method::IlpNt {
                    Stores::NonTemporal
                } else {
                    Stores::Auto
                };
                self.pipeline
                    .run_with(src, dst, &mut st, stores)
                    .expect("equal lengths");
                if self.workload == Workload::CopyCrc32 {
                    st.crc
                } else {
                    st.sum as u32
                }
            }
        }
    }
}

/// Where the data is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Placement {
    /// One message of this many bytes, processed again and again.
    InCache(usize),
    /// Messages of `message` bytes filling `total` bytes of source (and as
    /// much destination), processed in turn.
    OutOfCache {
        /// Bytes per message.
        message: usize,
        /// Bytes of all sources together.
        total: usize,
    },
}

impl Placement {
    /// The column label.
    pub fn label(self) -> String {
        match self {
            Placement::InCache(n) => format!("in cache, {} KiB", n >> 10),
            Placement::OutOfCache { message, total } => {
                format!(
                    "out of cache, {} MiB in {} KiB messages",
                    total >> 20,
                    message >> 10
                )
            }
        }
    }
}

/// One cell group of the table: a workload over one placement, the
/// throughput of each method in MB/s (10^6 bytes per second), medians
/// over the rounds.
#[derive(Clone, Debug)]
pub struct Row {
    /// The workload.
    pub workload: Workload,
    /// The placement.
    pub placement: Placement,
    /// MB/s of [`Method::Separate`].
    pub separate: f64,
    /// MB/s of [`Method::HandFused`].
    pub handfused: f64,
    /// MB/s of [`Method::Ilp`].
    pub ilp: f64,
    /// MB/s of [`Method::IlpNt`].
    pub ilp_nt: f64,
    /// Every round's MB/s of each method, in [`Method::ALL`]'s order (the
    /// samples the medians above are taken over).
    pub samples: [Vec<f64>; 4],
}

impl Row {
    /// ilp's speed over the separate passes.
    pub fn ilp_vs_separate(&self) -> f64 {
        self.ilp / self.separate
    }

    /// ilp with non-temporal stores over the separate passes.
    pub fn ilp_nt_vs_separate(&self) -> f64 {
        self.ilp_nt / self.separate
    }

    /// ilp's speed over the hand-fused loop.
    pub fn ilp_vs_handfused(&self) -> f64 {
        self.ilp / self.handfused
    }
}

/// The size of the last-level cache from sysfs, if it can be read.
pub fn llc_bytes() -> Option<usize> {
    let mut best = None;
    for i in 0..8 {
        let dir = format!("/sys/devices/system/cpu/cpu0/cache/index{i}");
        let Ok(level) = std::fs::read_to_string(format!("{dir}/level")) else {
            break;
        };
        let size = std::fs::read_to_string(format!("{dir}/size")).ok()?;
        let size = size.trim();
        let n: usize = size.trim_end_matches(['K', 'M']).parse().ok()?;
        let bytes = if size.ends_with('M') {
            n << 20
        } else {
            n << 10
        };
        let level: u32 = level.trim().parse().ok()?;
        if best.is_none_or(|(l, _)| level >= l) {
            best = Some((level, bytes));
        }
    }
    best.map(|(_, b)| b)
}

/// Settings of a run.
#[derive(Clone, Debug)]
pub struct Config {
    /// The placements, in order.
    pub placements: Vec<Placement>,
    /// Rounds per in-cache placement (each method once per round, in
    /// rotating order); the median is reported.
    pub rounds: usize,
    /// Rounds per out-of-cache placement (each a sweep over all of it).
    pub rounds_out: usize,
    /// Least time of one in-cache sample.
    pub sample: Duration,
    /// The widest vector registers the generated loops may use.
    pub vectors: Vectors,
}

impl Config {
    /// 4 KiB and 64 KiB in cache; out of cache, a working set of
    /// `llc_multiple` times the last-level cache (64 MiB if sysfs does not
    /// say) in 64 KiB messages, and the same in messages of twice the
    /// last-level cache (so that every separate pass streams from memory).
    pub fn standard(llc_multiple: usize) -> Config {
        let llc = llc_bytes().unwrap_or(64 << 20);
        let total = llc * llc_multiple.max(2);
        Config {
            placements: vec![
                Placement::InCache(4 << 10),
                Placement::InCache(64 << 10),
                Placement::OutOfCache {
                    message: 64 << 10,
                    total,
                },
                Placement::OutOfCache {
                    message: (2 * llc).next_power_of_two(),
                    total,
                },
            ],
            rounds: 7,
            rounds_out: 3,
            sample: Duration::from_millis(30),
            vectors: Vectors::Widest,
        }
    }

    /// Only the in-cache rows of [`standard`](Config::standard) (4 KiB
    /// and 64 KiB), with its rounds: a quick check of the in-cache
    /// targets.
    pub fn in_cache() -> Config {
        let mut c = Config::standard(2);
        c.placements.retain(|p| matches!(p, Placement::InCache(_)));
        c
    }

    /// Small and quick, for the demo: 4 KiB and 64 KiB in cache, 64 MiB in
    /// 64 KiB messages, few rounds.
    pub fn quick() -> Config {
        Config {
            placements: vec![
                Placement::InCache(4 << 10),
                Placement::InCache(64 << 10),
                Placement::OutOfCache {
                    message: 64 << 10,
                    total: 64 << 20,
                },
            ],
            rounds: 3,
            rounds_out: 1,
            sample: Duration::from_millis(20),
            vectors: Vectors::Widest,
        }
    }
}

/// `len` pseudo-random bytes from `seed` (xorshift64, eight bytes a
/// step): the data of the benchmarks and of the tests.
pub fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut v = vec![0; len];
    fill(&mut v, seed);
    v
}

fn fill(buf: &mut [u8], seed: u64) {
    let mut x = seed | 1;
    for c in buf.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x.to_le_bytes();
        c.copy_from_slice(&b[..c.len()]);
    }
}

/// Bytes past a 64-byte line at which every source and destination of the
/// benchmark starts (so the loops meet misaligned stores, as real buffers
/// do, and ilp's aligning head is part of what is measured).
pub const LINE_OFFSET: usize = 16;

/// Where the destination starts relative to the source, modulo a 4 KiB
/// page: half a page apart. glibc's `memcpy` (`rep movsb` on CPUs with
/// FSRM) runs at about 1/25 of its speed on AMD Zen 3 when `dst - src` is
/// 16 modulo 4096 (2.8 GB/s against 77 GB/s for a 4 KiB copy in L1), and
/// two `Vec`s taken from the heap one after the other land exactly there;
/// the separate passes would then measure that accident rather than the
/// cost of a second pass.
pub const PAGE_DISTANCE: usize = 2048;

const LAYOUT_SLACK: usize = 2 * 4096;

/// `len`-byte windows of `src` and `dst` that start [`LINE_OFFSET`] bytes
/// past a 64-byte line and [`PAGE_DISTANCE`] apart modulo 4 KiB; each
/// buffer must hold `len + 8192` bytes.
fn laid_out<'a>(src: &'a mut [u8], dst: &'a mut [u8], len: usize) -> (&'a mut [u8], &'a mut [u8]) {
    let start = |b: &[u8], at: usize| {
        let a = b.as_ptr() as usize;
        a.next_multiple_of(4096) - a + at
    };
    let s = start(src, LINE_OFFSET);
    let d = start(dst, PAGE_DISTANCE + LINE_OFFSET);
    (&mut src[s..s + len], &mut dst[d..d + len])
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Runs the table; `progress` hears about each step.
pub fn run(cfg: &Config, mut progress: impl FnMut(&str)) -> Vec<Row> {
    let runners: Vec<Runner> = Workload::ALL
        .iter()
        .map(|&w| Runner::with_vectors(w, cfg.vectors))
        .collect();
    let mut rows = Vec::new();
    let span = |p: Placement| match p {
        Placement::InCache(n) => (n, n),
        Placement::OutOfCache { message, total } => (message, total / message * message),
    };
    let most = cfg.placements.iter().map(|&p| span(p).1).max().unwrap_or(0);
    progress(&format!(
        "filling {} MiB of source and destination",
        (2 * most) >> 20
    ));
    let mut src_buf = vec![0u8; most + LAYOUT_SLACK];
    let mut dst_buf = vec![0u8; most + LAYOUT_SLACK];
    let (src_all, dst_all) = laid_out(&mut src_buf, &mut dst_buf, most);
    fill(src_all, 42);
    fill(dst_all, 7);
    let (src_all, dst_all) = (&*src_all, dst_all);
    for &placement in &cfg.placements {
        let (message, total) = span(placement);
        let (src, dst) = (&src_all[..total], &mut dst_all[..total]);
        progress(&placement.label());
        let rounds = match placement {
            Placement::InCache(_) => cfg.rounds,
            Placement::OutOfCache { .. } => cfg.rounds_out,
        };
        for r in &runners {
            // Same answers from every method (on the first message).
            let want = r.once(Method::Separate, &src[..message], &mut dst[..message]);
            for m in Method::ALL {
                assert_eq!(
                    r.once(m, &src[..message], &mut dst[..message]),
                    want,
                    "{:?} {m:?}",
                    r.workload
                );
            }
            let n = Method::ALL.len();
            let mut times: [Vec<f64>; 4] = Default::default();
            for round in 0..rounds {
                for k in 0..n {
                    let mi = (round + k) % n;
                    let m = Method::ALL[mi];
                    let mb = match placement {
                        Placement::InCache(_) => {
                            let (s, d) = (&src[..message], &mut dst[..message]);
                            // Warm, then repeat until the sample is long enough.
                            black_box(r.once(m, s, d));
                            let mut iters = 0u64;
                            let t = Instant::now();
                            while t.elapsed() < cfg.sample {
                                for _ in 0..64 {
                                    black_box(r.once(m, black_box(s), d));
                                }
                                iters += 64;
                            }
                            (iters * message as u64) as f64 / t.elapsed().as_secs_f64() / 1e6
                        }
                        Placement::OutOfCache { .. } => {
                            let t = Instant::now();
                            for (s, d) in
                                src.chunks_exact(message).zip(dst.chunks_exact_mut(message))
                            {
                                black_box(r.once(m, black_box(s), d));
                            }
                            total as f64 / t.elapsed().as_secs_f64() / 1e6
                        }
                    };
                    times[mi].push(mb);
                }
            }
            let [sep, hand, ilp, ilp_nt] = times.clone().map(median);
            let row = Row {
                workload: r.workload,
                placement,
                separate: sep,
                handfused: hand,
                ilp,
                ilp_nt,
                samples: times,
            };
            progress(&format!(
                "  {:<22} separate {:>8.0}  hand-fused {:>8.0}  ilp {:>8.0}  ilp-nt {:>8.0} MB/s   ilp/separate {:.2}x  ilp-nt/separate {:.2}x  ilp/hand {:.2}x",
                r.workload.name(),
                sep,
                hand,
                ilp,
                ilp_nt,
                row.ilp_vs_separate(),
                row.ilp_nt_vs_separate(),
                row.ilp_vs_handfused()
            ));
            rows.push(row);
        }
    }
    rows
}

/// The rows as a Markdown table.
pub fn markdown(rows: &[Row]) -> String {
    let mut s = String::from(
        "| pipeline | data | separate MB/s | hand-fused MB/s | ilp MB/s | ilp-nt MB/s | ilp / separate | ilp-nt / separate | ilp / hand-fused |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        s += &format!(
            "| {} | {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.2}x | {:.2}x | {:.2}x |\n",
            r.workload.name(),
            r.placement.label(),
            r.separate,
            r.handfused,
            r.ilp,
            r.ilp_nt,
            r.ilp_vs_separate(),
            r.ilp_nt_vs_separate(),
            r.ilp_vs_handfused()
        );
    }
    s
}
