//! Table 4 replicated: instructions executed in the stubs and the server
//! loop, each direction, counted exactly by callgrind.
//!
//! How it counts. Every family runs over a single-threaded loopback
//! carrier whose `call` runs the server's dispatch directly (no wait, no
//! second thread): `fastpath` over `FpLoop` and the peers over
//! [`Loopback`], carriers without a channel protocol (as IDL4's counts,
//! whose IPC is the kernel's); `fastpath over shm` and `fastpath dynamic`
//! over an `idl::rt::shm` channel whose client end is a loopback (the
//! client posts by the channel's protocol and its wait runs the server's
//! loop once on the server end: take, dispatch, reply, look for a next
//! request), so that the static and the dynamic stubs are compared over
//! the same protocol. The harness wraps each call in [`idlb_call`], and every
//! server stub calls its method through [`super::server::idlb_method`].
//! This executable re-runs itself under
//!
//! ```text
//! valgrind --tool=callgrind --zero-before=idlb_call \
//!     --dump-before=idlb_method --dump-after=idlb_method_body \
//!     --dump-after=idlb_call_inner
//! ```
//!
//! so that counting starts afresh at each call's entry (`idlb_call` calls
//! `idlb_call_inner`, which calls the client stub), and each call is cut
//! into three dumps: **A** from the client stub's entry to the
//! method's (client marshal, the carrier, the server loop's dispatch,
//! server unmarshal: the paper's client » server), **M** the method
//! (excluded, as IDL4 excludes the server's work), and **B** from the
//! method's return to the client stub's return (server marshal, the
//! carrier's return, client unmarshal: client « server). The same is done
//! for the empty call (the carrier alone: a call with no stub whose server
//! calls an empty method), and its A and B are subtracted, so what remains
//! is stubs plus dispatch. Each call is made [`ITERS`] times and the last
//! is used (the first pays lazy symbol binding); the counts of the last
//! two are checked equal.

use std::hint::black_box;
use std::path::Path;
use std::process::Command;

use super::server::{Pfs, PfsClient};
use super::wire::{self, Empty, Loopback};
use super::{capnp_peer, flat_peer, hand, prost_peer};

/// The environment variable that makes this executable the counted child.
pub const COUNT_ENV: &str = "FASTPATH_IDL_COUNT";

/// Elements of `pfs_write`'s and `pfs_get_direntries`'s arrays.
pub const TABLE4_INTS: usize = 8;

/// Times each call is made under callgrind.
pub const ITERS: usize = 3;

/// The calls counted, in order; the empty call (the baseline) comes first.
pub const OPS: [&str; 5] = [
    "empty",
    "null",
    "pfs_open",
    "pfs_write",
    "pfs_get_direntries",
];

/// One counted call: callgrind zeroes its counters on entering it.
#[unsafe(no_mangle)]
#[inline(never)]
pub fn idlb_call(f: &mut dyn FnMut()) {
    idlb_call_inner(f);
    // Distinct bodies, so that the four markers are not merged into one
    // symbol, and no tail call hides a return from callgrind.
    black_box(1u8);
}

/// The call inside [`idlb_call`]: callgrind dumps its counters on leaving
/// it (callgrind keeps one of zero/dump per function name, hence two).
#[unsafe(no_mangle)]
#[inline(never)]
pub fn idlb_call_inner(f: &mut dyn FnMut()) {
    f();
    black_box(2u8);
}

/// A family as the counter drives it.
pub trait Subject {
    /// The family's name.
    fn name(&self) -> &'static str;
    /// Makes call `op` (an index of [`OPS`]) once.
    fn op(&mut self, op: usize);
}

/// A peer or the hand-written stub over the [`Loopback`] carrier.
pub struct WireSubject<C> {
    client: C,
    empty: Loopback<Empty>,
    data: Vec<i32>,
    out: Vec<i32>,
}

impl<C> WireSubject<C> {
    /// The subject of `client`.
    pub fn new(client: C) -> WireSubject<C> {
        WireSubject {
            client,
            empty: Loopback::new(Empty, 64),
            data: (0..TABLE4_INTS as i32).collect(),
            out: Vec::with_capacity(TABLE4_INTS),
        }
    }
}

/// Makes call `op` through a [`PfsClient`]; the baseline is `empty`.
#[inline(always)]
pub fn call_op<C: PfsClient + ?Sized>(
    c: &mut C,
    op: usize,
    data: &[i32],
    out: &mut Vec<i32>,
    empty: &mut dyn FnMut(),
) {
    match op {
        0 => empty(),
        1 => {
            let _ = black_box(c.null());
        }
        2 => {
            let mut h = 0;
            let _ = black_box(c.pfs_open(1, 2, 3, 4, &mut h));
            black_box(h);
        }
        3 => {
            let mut pos = 0;
            let _ = black_box(c.pfs_write(5, &mut pos, 6, data));
            black_box(pos);
        }
        _ => {
            let mut pos = 0;
            let _ = black_box(c.pfs_get_direntries(5, &mut pos, TABLE4_INTS as i32, out));
            black_box(pos);
        }
    }
}

impl<C: PfsClient> Subject for WireSubject<C> {
    fn name(&self) -> &'static str {
        self.client.name()
    }

    fn op(&mut self, op: usize) {
        let e = &mut self.empty;
        call_op(&mut self.client, op, &self.data, &mut self.out, &mut || {
            let _ = black_box(wire::empty_call(e));
        });
    }
}

/// Loopback message buffer size for the counted calls.
const CAP: usize = 8192;

/// The families counted, in table order.
pub fn subjects() -> Vec<Box<dyn Subject>> {
    let mut v: Vec<Box<dyn Subject>> = Vec::new();
    if let Some(fp) = super::fastpath_family::count_subject() {
        v.push(fp);
    }
    if let Some(fp) = super::fastpath_family::shm_count_subject() {
        v.push(fp);
    }
    v.push(Box::new(WireSubject::new(hand::Client {
        wire: Loopback::new(hand::Server::default(), CAP),
    })));
    v.push(Box::new(WireSubject::new(prost_peer::Client {
        wire: Loopback::new(prost_peer::Server::default(), CAP),
    })));
    v.push(Box::new(WireSubject::new(capnp_peer::Client {
        wire: Loopback::new(capnp_peer::Server::default(), CAP),
    })));
    v.push(Box::new(WireSubject::new(flat_peer::Client::new(
        Loopback::new(flat_peer::Server::default(), CAP),
    ))));
    if let Some(d) = super::fastpath_family::dynamic_subject() {
        v.push(d);
    }
    if let Some(c) = super::c_family::count_subject() {
        v.push(c);
    }
    v
}

/// The counted child: every subject's every call, [`ITERS`] times each.
pub fn child_main() {
    let _ = Pfs::new();
    for mut s in subjects() {
        for op in 0..OPS.len() {
            for _ in 0..ITERS {
                idlb_call(&mut || s.op(op));
            }
        }
    }
}

/// One family's counts: per call (index of [`OPS`]), the instructions of
/// client » server and client « server, the baseline subtracted (the
/// baseline's own row holds the raw carrier's counts).
#[derive(Clone, Debug)]
pub struct Counts {
    /// The family.
    pub name: &'static str,
    /// Per call: (client » server, client « server).
    pub dirs: Vec<(i64, i64)>,
}

/// Runs this executable under callgrind as the counted child and returns
/// each family's counts, or why they could not be taken.
pub fn measure(exe: &Path) -> Result<Vec<Counts>, String> {
    measure_with(exe, std::env::args_os().skip(1))
}

/// [`measure`] of `exe` run with `args` (the command line that reaches
/// [`super::child_dispatch`], e.g. `bench idl`), for callers that are not
/// that executable (a test of the built program).
pub fn measure_with<A: AsRef<std::ffi::OsStr>>(
    exe: &Path,
    args: impl IntoIterator<Item = A>,
) -> Result<Vec<Counts>, String> {
    match Command::new("valgrind").arg("--version").output() {
        Ok(o) if o.status.success() => {}
        _ => return Err("valgrind is not installed (scripts/install-deps.sh)".into()),
    }
    let file = std::env::temp_dir().join(format!("fastpath-idl-{}.callgrind", std::process::id()));
    let run = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg("--zero-before=idlb_call")
        .arg("--dump-before=idlb_method")
        .arg("--dump-after=idlb_method_body")
        .arg("--dump-after=idlb_call_inner")
        .arg("--combine-dumps=yes")
        .arg(format!("--callgrind-out-file={}", file.display()))
        .arg(exe)
        .args(args)
        .env(COUNT_ENV, "1")
        .output()
        .map_err(|e| format!("running valgrind: {e}"))?;
    if !run.status.success() {
        return Err(format!(
            "the callgrind run failed ({}): {}",
            run.status,
            String::from_utf8_lossy(&run.stderr)
                .lines()
                .last()
                .unwrap_or("")
        ));
    }
    let text = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    let _ = std::fs::remove_file(&file);
    let parts = parse_parts(&text);
    let names: Vec<&'static str> = subjects().iter().map(|s| s.name()).collect();
    let per_call = 3;
    let need = names.len() * OPS.len() * ITERS * per_call;
    if parts.len() < need {
        return Err(format!(
            "callgrind gave {} dumps, expected at least {need}",
            parts.len()
        ));
    }
    let mut out = Vec::new();
    let mut i = 0;
    for name in names {
        let mut raw = Vec::new();
        for op in OPS {
            let mut last = (0, 0);
            let mut prev = None;
            for it in 0..ITERS {
                let (a, m, b) = (&parts[i], &parts[i + 1], &parts[i + 2]);
                i += per_call;
                for (p, want) in [
                    (a, "dump-before=idlb_method"),
                    (m, "dump-after=idlb_method_body"),
                    (b, "dump-after=idlb_call_inner"),
                ] {
                    if !p.0.contains(want) {
                        return Err(format!(
                            "{name} {op}: dump triggered by {:?}, expected {want}",
                            p.0
                        ));
                    }
                }
                if it == ITERS - 1 {
                    prev = Some(last);
                }
                last = (a.1 as i64, b.1 as i64);
            }
            if ITERS > 1 && prev != Some(last) {
                return Err(format!(
                    "{name} {op}: the last two calls' counts differ: {prev:?} and {last:?}"
                ));
            }
            raw.push(last);
        }
        let base = raw[0];
        let dirs = raw
            .iter()
            .enumerate()
            .map(|(k, &(a, b))| {
                if k == 0 {
                    (a, b)
                } else {
                    (a - base.0, b - base.1)
                }
            })
            .collect();
        out.push(Counts { name, dirs });
    }
    Ok(out)
}

/// The parts of a combined callgrind output: each part's trigger (its
/// `desc: Trigger:` line) and its instruction total.
pub fn parse_parts(text: &str) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let mut trigger = String::new();
    let mut in_part = false;
    for l in text.lines() {
        if l.starts_with("part:") {
            in_part = true;
            trigger.clear();
        } else if let Some(t) = l.strip_prefix("desc: Trigger:") {
            trigger = t.trim().to_string();
        } else if let Some(t) = l
            .strip_prefix("totals:")
            .or_else(|| l.strip_prefix("summary:"))
            && (in_part || out.is_empty())
        {
            let v = t.split_whitespace().next().and_then(|v| v.parse().ok());
            out.push((trigger.clone(), v.unwrap_or(0)));
            in_part = false;
        }
    }
    out
}
