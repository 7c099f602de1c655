//! The ESP suite: Table 1 of Xu, Kumar and Li, "Fast Paths in Concurrent
//! Programs" (PACT 2004, §6.1): the four filter programs of
//! [`esp::filters`] run as process-based native code, with their automatic
//! fast paths, as automata, and beside them
//!
//! * [`fused`]: the *manual fast path*: per program, one hand-written Rust
//!   loop doing the whole chain, byte by byte, with the same algorithms as
//!   the ESP filters (a bitwise CRC-32: ESP has no tables);
//! * [`threads`]: the same pipelines as OS threads, one per filter, over
//!   `crossbeam-channel` zero-capacity (rendezvous) channels;
//! * [`go`]: the same pipelines as goroutines over unbuffered channels, a
//!   small Go program kept in `crates/bench/peers/esp/` and built here with
//!   `go build` when `go` is installed.
//!
//! Every variant's output is checked against [`esp::filters::reference`]
//! before it is timed and on every timed stream; a variant that computes
//! something else is reported as failed, not timed.
//!
//! `fastpath bench esp` prints the table with ratios; `cargo bench -p
//! fastpath-bench --bench esp` is the criterion version.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use esp::filters::{self, PROGRAMS};
use esp::runtime::{Backend, Machine, Options};

/// The bytes of one benchmark stream (the paper's 10,000).
pub const STREAM_BYTES: usize = 10_000;

/// The benchmark stream: `len` bytes in short runs (1 to 4 of one value) of
/// small values (0 to 15), from a fixed seed. The runs take both branches of
/// `RLE`; the small values keep Program 4's `RLD`, which reads every other
/// byte of its input as a repeat count, at about an 8x expansion (so that
/// one entry of the fast path carries a whole stream within the default
/// repetition bound of 65,536 events per process). No byte or run length is
/// a PPP flag or escape (`0x7E`, `0x7D`): `PES`'s escape is the rare case
/// the specifications leave to the process-based code (see
/// `crates/esp/programs/programN.fp`).
pub fn stream(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        let r = next();
        let run = 1 + (r & 3) as usize;
        let value = ((r >> 16) & 15) as u8;
        for _ in 0..run.min(len - out.len()) {
            out.push(value);
        }
    }
    out
}

/// The hand-fused loops: the manual fast paths of Table 1.
///
/// Each program is one function: one loop over the input whose body is the
/// whole chain's per-byte code, stage after stage, each stage's state in a
/// local (a small struct rustc keeps in registers), then the chain's
/// end-of-stream stage. The stages are written once as `push` (one byte in,
/// its output bytes handed to the next stage's `push`) and `end`; the
/// closures that join them are inlined, so each function compiles to a
/// single loop with no calls but `Vec::push`'s growth.
pub mod fused {
    /// `Evener`'s state.
    #[derive(Default)]
    struct Evener {
        odd: bool,
    }

    impl Evener {
        #[inline(always)]
        fn push(&mut self, b: u8, mut emit: impl FnMut(u8)) {
            self.odd = !self.odd;
            emit(b);
        }
        #[inline(always)]
        fn end(&mut self, mut emit: impl FnMut(u8)) {
            if self.odd {
                emit(0);
            }
            self.odd = false;
        }
    }

    /// `2ByteSwap`'s state.
    #[derive(Default)]
    struct Swap {
        held: u8,
        have: bool,
    }

    impl Swap {
        #[inline(always)]
        fn push(&mut self, b: u8, mut emit: impl FnMut(u8)) {
            if self.have {
                self.have = false;
                emit(b);
                emit(self.held);
            } else {
                self.have = true;
                self.held = b;
            }
        }
        #[inline(always)]
        fn end(&mut self, mut emit: impl FnMut(u8)) {
            if self.have {
                emit(self.held);
            }
            self.have = false;
        }
    }

    /// `CRC32`'s state: the running CRC, bit by bit as the ESP filter does.
    struct Crc {
        crc: u32,
    }

    impl Default for Crc {
        fn default() -> Self {
            Crc { crc: 0xFFFF_FFFF }
        }
    }

    impl Crc {
        #[inline(always)]
        fn push(&mut self, b: u8, mut emit: impl FnMut(u8)) {
            let mut crc = self.crc ^ u32::from(b);
            for _ in 0..8 {
                crc = (crc >> 1) ^ (0xEDB8_8320 & (crc & 1).wrapping_neg());
            }
            self.crc = crc;
            emit(b);
        }
        #[inline(always)]
        fn end(&mut self, mut emit: impl FnMut(u8)) {
            for b in (self.crc ^ 0xFFFF_FFFF).to_le_bytes() {
                emit(b);
            }
            self.crc = 0xFFFF_FFFF;
        }
    }

    /// `RLE`'s state: the current run.
    #[derive(Default)]
    struct Rle {
        cur: u8,
        count: u32,
    }

    impl Rle {
        #[inline(always)]
        fn push(&mut self, b: u8, mut emit: impl FnMut(u8)) {
            if self.count != 0 && b == self.cur && self.count < 255 {
                self.count += 1;
            } else {
                let (n, v) = (self.count, self.cur);
                self.cur = b;
                self.count = 1;
                if n != 0 {
                    emit(n as u8);
                    emit(v);
                }
            }
        }
        #[inline(always)]
        fn end(&mut self, mut emit: impl FnMut(u8)) {
            if self.count != 0 {
                emit(self.count as u8);
                emit(self.cur);
            }
            self.count = 0;
        }
    }

    /// `RLD`'s state: a count waiting for its byte.
    #[derive(Default)]
    struct Rld {
        count: u8,
        have: bool,
    }

    impl Rld {
        #[inline(always)]
        fn push(&mut self, b: u8, mut emit: impl FnMut(u8)) {
            if self.have {
                self.have = false;
                for _ in 0..self.count {
                    emit(b);
                }
            } else {
                self.have = true;
                self.count = b;
            }
        }
        #[inline(always)]
        fn end(&mut self) {
            self.have = false;
        }
    }

    /// `PES` has no state.
    #[inline(always)]
    fn pes(b: u8, mut emit: impl FnMut(u8)) {
        if b == 0x7E || b == 0x7D {
            emit(0x7D);
            emit(b ^ 0x20);
        } else {
            emit(b);
        }
    }

    /// Program 1: Evener, 2ByteSwap, CRC32. Clears `out` and writes the
    /// stream's output to it.
    #[inline(never)]
    pub fn program1(input: &[u8], out: &mut Vec<u8>) {
        out.clear();
        let (mut ev, mut sw, mut crc) = (Evener::default(), Swap::default(), Crc::default());
        for &b in input {
            ev.push(b, |x| sw.push(x, |y| crc.push(y, |z| out.push(z))));
        }
        ev.end(|x| sw.push(x, |y| crc.push(y, |z| out.push(z))));
        sw.end(|y| crc.push(y, |z| out.push(z)));
        crc.end(|z| out.push(z));
    }

    /// Program 2: RLE, 2ByteSwap, PES.
    #[inline(never)]
    pub fn program2(input: &[u8], out: &mut Vec<u8>) {
        out.clear();
        let (mut rle, mut sw) = (Rle::default(), Swap::default());
        for &b in input {
            rle.push(b, |x| sw.push(x, |y| pes(y, |z| out.push(z))));
        }
        rle.end(|x| sw.push(x, |y| pes(y, |z| out.push(z))));
        sw.end(|y| pes(y, |z| out.push(z)));
    }

    /// Program 3: RLE, 2ByteSwap, PES, PES, 2ByteSwap, RLD.
    #[inline(never)]
    pub fn program3(input: &[u8], out: &mut Vec<u8>) {
        out.clear();
        let (mut rle, mut sw1, mut sw2, mut rld) = (
            Rle::default(),
            Swap::default(),
            Swap::default(),
            Rld::default(),
        );
        for &b in input {
            rle.push(b, |a| {
                sw1.push(a, |c| {
                    pes(c, |d| {
                        pes(d, |e| sw2.push(e, |g| rld.push(g, |h| out.push(h))))
                    })
                })
            });
        }
        rle.end(|a| {
            sw1.push(a, |c| {
                pes(c, |d| {
                    pes(d, |e| sw2.push(e, |g| rld.push(g, |h| out.push(h))))
                })
            })
        });
        sw1.end(|c| {
            pes(c, |d| {
                pes(d, |e| sw2.push(e, |g| rld.push(g, |h| out.push(h))))
            })
        });
        sw2.end(|g| rld.push(g, |h| out.push(h)));
        rld.end();
    }

    /// Program 4: CRC32, 2ByteSwap, PES, PES, 2ByteSwap, RLD.
    #[inline(never)]
    pub fn program4(input: &[u8], out: &mut Vec<u8>) {
        out.clear();
        let (mut crc, mut sw1, mut sw2, mut rld) = (
            Crc::default(),
            Swap::default(),
            Swap::default(),
            Rld::default(),
        );
        for &b in input {
            crc.push(b, |a| {
                sw1.push(a, |c| {
                    pes(c, |d| {
                        pes(d, |e| sw2.push(e, |g| rld.push(g, |h| out.push(h))))
                    })
                })
            });
        }
        crc.end(|a| {
            sw1.push(a, |c| {
                pes(c, |d| {
                    pes(d, |e| sw2.push(e, |g| rld.push(g, |h| out.push(h))))
                })
            })
        });
        sw1.end(|c| {
            pes(c, |d| {
                pes(d, |e| sw2.push(e, |g| rld.push(g, |h| out.push(h))))
            })
        });
        sw2.end(|g| rld.push(g, |h| out.push(h)));
        rld.end();
    }

    /// A fused loop: one stream in, its output written to the vector.
    pub type Loop = fn(&[u8], &mut Vec<u8>);

    /// The fused loop of `PROGRAMS[program]`.
    pub fn program(program: usize) -> Option<Loop> {
        [program1, program2, program3, program4]
            .get(program)
            .map(|f| *f as Loop)
    }
}

/// The pipelines as OS threads over zero-capacity `crossbeam-channel`
/// channels: each filter a thread running the same algorithm as its ESP
/// process, a byte a message (`Some(b)`), the end of a stream `None`.
pub mod threads {
    use crossbeam_channel::{Receiver, Sender, bounded};
    use std::thread::JoinHandle;

    /// A message between filters: a byte, or the end of the stream.
    type Msg = Option<u8>;

    /// The filters a pipeline may have between its ends.
    const FILTERS: [&str; 6] = ["Evener", "2ByteSwap", "CRC32", "RLE", "RLD", "PES"];

    /// One filter thread's body.
    fn filter(name: &str, rx: Receiver<Msg>, tx: Sender<Msg>) {
        let send = |m: Msg| tx.send(m).is_ok();
        match name {
            "Evener" => {
                let mut odd = false;
                while let Ok(m) = rx.recv() {
                    let ok = match m {
                        Some(b) => {
                            odd = !odd;
                            send(Some(b))
                        }
                        None => {
                            let ok = !odd || send(Some(0));
                            odd = false;
                            ok && send(None)
                        }
                    };
                    if !ok {
                        return;
                    }
                }
            }
            "2ByteSwap" => {
                let mut held: Option<u8> = None;
                while let Ok(m) = rx.recv() {
                    let ok = match (m, held.take()) {
                        (Some(b), Some(h)) => send(Some(b)) && send(Some(h)),
                        (Some(b), None) => {
                            held = Some(b);
                            true
                        }
                        (None, h) => (h.is_none() || send(h)) && send(None),
                    };
                    if !ok {
                        return;
                    }
                }
            }
            "CRC32" => {
                let mut crc = 0xFFFF_FFFFu32;
                while let Ok(m) = rx.recv() {
                    let ok = match m {
                        Some(b) => {
                            crc ^= u32::from(b);
                            for _ in 0..8 {
                                crc = (crc >> 1) ^ (0xEDB8_8320 & (crc & 1).wrapping_neg());
                            }
                            send(Some(b))
                        }
                        None => {
                            let bytes = (crc ^ 0xFFFF_FFFF).to_le_bytes();
                            crc = 0xFFFF_FFFF;
                            bytes.iter().all(|&b| send(Some(b))) && send(None)
                        }
                    };
                    if !ok {
                        return;
                    }
                }
            }
            "RLE" => {
                let (mut cur, mut count) = (0u8, 0u32);
                while let Ok(m) = rx.recv() {
                    let ok = match m {
                        Some(b) if count != 0 && b == cur && count < 255 => {
                            count += 1;
                            true
                        }
                        Some(b) => {
                            let (n, v) = (count, cur);
                            cur = b;
                            count = 1;
                            n == 0 || (send(Some(n as u8)) && send(Some(v)))
                        }
                        None => {
                            let ok = count == 0 || (send(Some(count as u8)) && send(Some(cur)));
                            count = 0;
                            ok && send(None)
                        }
                    };
                    if !ok {
                        return;
                    }
                }
            }
            "RLD" => {
                let mut count: Option<u8> = None;
                while let Ok(m) = rx.recv() {
                    let ok = match (m, count.take()) {
                        (Some(b), Some(n)) => (0..n).all(|_| send(Some(b))),
                        (Some(b), None) => {
                            count = Some(b);
                            true
                        }
                        (None, _) => send(None),
                    };
                    if !ok {
                        return;
                    }
                }
            }
            "PES" => {
                while let Ok(m) = rx.recv() {
                    let ok = match m {
                        Some(b) if b == 0x7E || b == 0x7D => {
                            send(Some(0x7D)) && send(Some(b ^ 0x20))
                        }
                        m => send(m),
                    };
                    if !ok {
                        return;
                    }
                }
            }
            // Pipeline::new admits only the names above.
            _ => {}
        }
    }

    /// A running pipeline: `ReadFromArray`, the filters and `WriteToArray`,
    /// each its own thread. Dropping it stops the threads.
    pub struct Pipeline {
        streams: Option<Sender<Vec<u8>>>,
        results: Receiver<Vec<u8>>,
        threads: Vec<JoinHandle<()>>,
    }

    impl Pipeline {
        /// Starts the threads of a chain (as in
        /// [`esp::filters::FilterProgram::chain`]). `None` if a middle
        /// stage is not a filter.
        pub fn new(chain: &[&str]) -> Option<Pipeline> {
            let (first, rest) = chain.split_first()?;
            let (last, middle) = rest.split_last()?;
            if *first != "ReadFromArray"
                || *last != "WriteToArray"
                || middle.iter().any(|f| !FILTERS.contains(f))
            {
                return None;
            }
            let (stx, srx) = bounded::<Vec<u8>>(0);
            let (rtx, rrx) = bounded::<Vec<u8>>(0);
            let (tx, mut rx) = bounded::<Msg>(0);
            let mut threads = Vec::new();
            // ReadFromArray: a stream at a time from the host.
            threads.push(std::thread::spawn(move || {
                while let Ok(stream) = srx.recv() {
                    for b in stream {
                        if tx.send(Some(b)).is_err() {
                            return;
                        }
                    }
                    if tx.send(None).is_err() {
                        return;
                    }
                }
            }));
            for name in middle {
                let (ntx, nrx) = bounded::<Msg>(0);
                let name = name.to_string();
                let input = std::mem::replace(&mut rx, nrx);
                threads.push(std::thread::spawn(move || filter(&name, input, ntx)));
            }
            // WriteToArray: collects a stream and hands it to the host.
            threads.push(std::thread::spawn(move || {
                let mut out = Vec::new();
                while let Ok(m) = rx.recv() {
                    match m {
                        Some(b) => out.push(b),
                        None => {
                            if rtx.send(std::mem::take(&mut out)).is_err() {
                                return;
                            }
                        }
                    }
                }
            }));
            Some(Pipeline {
                streams: Some(stx),
                results: rrx,
                threads,
            })
        }

        /// Runs one stream through the pipeline and returns what
        /// `WriteToArray` collected. `None` if the pipeline has stopped.
        pub fn run(&self, input: &[u8]) -> Option<Vec<u8>> {
            self.streams.as_ref()?.send(input.to_vec()).ok()?;
            self.results.recv().ok()
        }
    }

    impl Drop for Pipeline {
        fn drop(&mut self) {
            // Closing the host's sender ends ReadFromArray, whose sender's
            // end ends the next filter, and so on down the chain.
            self.streams = None;
            for t in self.threads.drain(..) {
                let _ = t.join();
            }
        }
    }
}

/// The Go peer: `crates/bench/peers/esp/main.go`, the pipelines as
/// goroutines over unbuffered channels.
pub mod go {
    use super::*;

    /// The Go program's directory.
    pub fn source_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("peers/esp")
    }

    /// The `go` command: `$GO` if set, else `go` on `PATH`.
    fn go_command() -> Result<PathBuf, String> {
        if let Some(go) = std::env::var_os("GO") {
            return Ok(PathBuf::from(go));
        }
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .map(|d| d.join("go"))
            .find(|p| p.is_file())
            .ok_or_else(|| "`go` is not on PATH (set GO=/path/to/go to use another)".into())
    }

    /// The built peer.
    pub struct Peer {
        exe: PathBuf,
        dir: PathBuf,
        /// `go version`.
        pub version: String,
    }

    impl Peer {
        /// Builds the Go program with `go build` into a fresh temporary
        /// directory. `Err` says why the peer is skipped (no `go`, or the
        /// build failed).
        pub fn build() -> Result<Peer, String> {
            let go = go_command()?;
            let dir = std::env::temp_dir().join(format!("fastpath-esp-go-{}", std::process::id()));
            std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let exe = dir.join("esp-peer");
            let out = Command::new(&go)
                .arg("build")
                .arg("-o")
                .arg(&exe)
                .arg(".")
                .current_dir(source_dir())
                .env("GOFLAGS", "-mod=mod")
                .env("GO111MODULE", "on")
                .env("CGO_ENABLED", "0")
                .output()
                .map_err(|e| format!("cannot run {}: {e}", go.display()))?;
            if !out.status.success() {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(format!(
                    "go build failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
            let version = Command::new(&go)
                .arg("version")
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
                .unwrap_or_default();
            Ok(Peer { exe, dir, version })
        }

        /// Runs `iterations` streams of `input` through program `program`
        /// (an index into [`PROGRAMS`]) in the Go pipeline, which checks
        /// each output against `expected`; returns the best of its `rounds`
        /// rounds in ns per stream.
        pub fn time(
            &self,
            program: usize,
            input: &[u8],
            expected: &[u8],
            iterations: u32,
            rounds: u32,
        ) -> Result<f64, String> {
            let inp = self.dir.join(format!("in{program}"));
            let exp = self.dir.join(format!("expected{program}"));
            std::fs::write(&inp, input).map_err(|e| e.to_string())?;
            std::fs::write(&exp, expected).map_err(|e| e.to_string())?;
            let out = Command::new(&self.exe)
                .arg((program + 1).to_string())
                .arg(&inp)
                .arg(&exp)
                .arg(iterations.to_string())
                .arg(rounds.to_string())
                .output()
                .map_err(|e| format!("cannot run the Go peer: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "the Go peer failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
            let text = String::from_utf8_lossy(&out.stdout);
            text.split_whitespace()
                .nth(1)
                .and_then(|t| t.parse().ok())
                .ok_or_else(|| format!("unexpected Go peer output: {text:?}"))
        }
    }

    impl Drop for Peer {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The machine instructions of a compiled Rust function, counted by
/// decoding from its entry with iced-x86 and following its branches (not
/// its calls) to every reachable instruction. Jumps further than 64 KiB
/// from the entry, or before it, are taken as tail calls and not followed.
pub fn rust_instructions(f: fused::Loop) -> usize {
    function_instructions(f as usize, &mut Vec::new())
}

/// The machine instructions of the process-based scheduler: the functions
/// [`esp::runtime::scheduler_functions`] lists that are reachable from the
/// first (the machine's run loop) through direct calls, each counted as
/// [`rust_instructions`] counts a function (its branches followed, and so
/// the helpers the compiler inlined into it). Calls to any other function
/// (the standard library's, allocation, formatting of errors) are not
/// followed: they are not the scheduler's.
pub fn scheduler_instructions() -> usize {
    let listed = esp::runtime::scheduler_functions();
    let Some(&run) = listed.first() else {
        return 0;
    };
    let mut done = vec![run];
    let mut todo = vec![run];
    let mut total = 0;
    while let Some(f) = todo.pop() {
        let mut calls = Vec::new();
        total += function_instructions(f, &mut calls);
        for c in calls {
            if listed.contains(&c) && !done.contains(&c) {
                done.push(c);
                todo.push(c);
            }
        }
    }
    total
}

/// The instructions reachable from `entry` by branches (see
/// [`rust_instructions`]); the targets of its direct calls and tail calls
/// are pushed on `calls`.
fn function_instructions(entry: usize, calls: &mut Vec<usize>) -> usize {
    use iced_x86::{Decoder, DecoderOptions, FlowControl};
    const WINDOW: usize = 64 << 10;
    let window = mapped_len(entry, WINDOW);
    // SAFETY: `entry` is the address of a function of this executable (a
    // function pointer), in its text segment, which stays mapped for the
    // life of the process, and `mapped_len` found `window`
    // bytes from `entry` inside one readable mapping of /proc/self/maps.
    let code = unsafe { std::slice::from_raw_parts(entry as *const u8, window) };
    let mut seen = vec![false; window];
    let mut todo = vec![0usize];
    let mut count = 0;
    while let Some(start) = todo.pop() {
        let mut dec = Decoder::with_ip(
            64,
            &code[start..],
            (entry + start) as u64,
            DecoderOptions::NONE,
        );
        while dec.can_decode() {
            let ip = dec.ip() as usize - entry;
            if seen[ip] {
                break;
            }
            seen[ip] = true;
            let ins = dec.decode();
            count += 1;
            let target = ins.near_branch_target() as usize;
            let inside = |t: usize| t >= entry && t < entry + window;
            match ins.flow_control() {
                FlowControl::Call => calls.push(target),
                FlowControl::Next | FlowControl::IndirectCall => {}
                // A branch out of the window is a tail call.
                FlowControl::ConditionalBranch => {
                    if inside(target) {
                        todo.push(target - entry);
                    } else {
                        calls.push(target);
                    }
                }
                FlowControl::UnconditionalBranch => {
                    if inside(target) {
                        todo.push(target - entry);
                    } else {
                        calls.push(target);
                    }
                    break;
                }
                _ => break,
            }
        }
    }
    count
}

/// How many of the `want` bytes from `addr` are mapped (readable), from
/// `/proc/self/maps`; 0 if it cannot tell.
fn mapped_len(addr: usize, want: usize) -> usize {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return 0;
    };
    for line in maps.lines() {
        let mut parts = line.split_whitespace();
        let (Some(range), Some(perms)) = (parts.next(), parts.next()) else {
            continue;
        };
        let Some((lo, hi)) = range.split_once('-') else {
            continue;
        };
        let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
        else {
            continue;
        };
        if (lo..hi).contains(&addr) && perms.starts_with('r') {
            return want.min(hi - addr);
        }
    }
    0
}

/// What a variant is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Variant {
    /// Process-based native code (`Backend::Native`, no specification).
    Native,
    /// The hand-fused Rust loop ([`fused`]).
    Fused,
    /// Process-based native code with the automatic fast paths.
    FastPath,
    /// Automata-based native code (`Backend::Automata`).
    Automata,
    /// OS threads over crossbeam rendezvous channels ([`threads`]).
    Threads,
    /// Goroutines ([`go`]).
    Go,
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Variant::Native => "ESP (process-based native)",
            Variant::Fused => "hand-fused Rust",
            Variant::FastPath => "ESP + automatic fast paths",
            Variant::Automata => "automata-based",
            Variant::Threads => "crossbeam threads",
            Variant::Go => "Go goroutines",
        })
    }
}

/// Loads `PROGRAMS[program]` on an ESP backend: `Native`, `FastPath`
/// (native with the program's specification) or `Automata`.
pub fn machine(program: usize, variant: Variant) -> Result<Machine, String> {
    let p = PROGRAMS.get(program).ok_or("no such program")?;
    let ir = esp::compile(p.source).map_err(|e| format!("{}: {e}", p.name))?;
    let mut options = Options::default();
    match variant {
        Variant::Native => options.backend = Backend::Native,
        Variant::FastPath => {
            options.backend = Backend::Native;
            options.spec =
                Some(esp::spec::parse(p.spec, &ir).map_err(|e| format!("{}.fp: {e}", p.name))?);
        }
        Variant::Automata => options.backend = Backend::Automata,
        other => return Err(format!("{other} is not an ESP backend")),
    }
    Machine::new(ir, options).map_err(|e| format!("{} on {variant}: {e}", p.name))
}

/// One timed variant of one program.
pub struct Timed {
    /// Best ns per input byte over the rounds, or why it was not timed.
    pub ns_per_byte: Result<f64, String>,
    /// Each round's ns per input byte (the Go peer: its one best, which
    /// the Go process takes over its own rounds).
    pub samples: Vec<f64>,
    /// Machine instructions of its code, where it has a meaningful count.
    pub size: Option<usize>,
    /// Fast-path entries, exits and aborts per stream (the fast-path
    /// variant only).
    pub fastpath_stats: Option<(f64, f64, f64)>,
}

/// The measurements of one program.
pub struct ProgramResult {
    /// `program1` ..
    pub name: &'static str,
    /// Its chain, `ReadFromArray -> ... -> WriteToArray`.
    pub chain: String,
    /// Output bytes of the benchmark stream.
    pub output_bytes: usize,
    /// Per [`Variant`], in the order of [`VARIANTS`].
    pub timed: Vec<(Variant, Timed)>,
    /// The process-based code's instructions (for the size ratios).
    pub process_size: Option<usize>,
    /// The instructions of the scheduler the process-based code returns to
    /// at every channel operation ([`scheduler_instructions`]); the same
    /// code serves the fast-path variant.
    pub scheduler_size: usize,
}

/// The variants, in table order.
pub const VARIANTS: [Variant; 6] = [
    Variant::Native,
    Variant::Fused,
    Variant::FastPath,
    Variant::Automata,
    Variant::Threads,
    Variant::Go,
];

/// How long to measure.
#[derive(Copy, Clone, Debug)]
pub struct Budget {
    /// Rounds per variant (the best is kept); variants interleave round by
    /// round.
    pub rounds: u32,
    /// Target wall time of one round of one in-thread variant, in ms.
    pub round_ms: f64,
    /// Rounds of the thread pipeline and of the Go peer, one stream (Go:
    /// [`GO_STREAMS`]) each: a context switch per message makes them slow.
    pub peer_rounds: u32,
}

/// Streams per round of the Go peer.
pub const GO_STREAMS: u32 = 20;

impl Budget {
    /// The default of `fastpath bench esp`: well under a minute in all.
    pub const DEFAULT: Budget = Budget {
        rounds: 7,
        round_ms: 25.0,
        peer_rounds: 3,
    };
    /// A quick run for smoke tests.
    pub const QUICK: Budget = Budget {
        rounds: 2,
        round_ms: 2.0,
        peer_rounds: 1,
    };
}

/// Measures every variant of program `program` (an index into
/// [`PROGRAMS`]) on one [`STREAM_BYTES`]-byte stream. `go` is the built Go
/// peer, or why it is skipped.
pub fn measure(program: usize, budget: Budget, go: &Result<go::Peer, String>) -> ProgramResult {
    let p = &PROGRAMS[program];
    let input = stream(STREAM_BYTES, 0x5EED_0000 + program as u64);
    let expected = filters::reference(program, &input);
    let bytes = input.len() as f64;

    // The in-thread runners: each runs one stream and says whether the
    // output was the reference's.
    type Runner = Box<dyn FnMut() -> Result<(), String>>;
    let mut runners: Vec<(Variant, Result<Runner, String>, Option<usize>)> = Vec::new();
    let mut process_size = None;
    let mut fp_machine_stats = None;
    for v in [
        Variant::Native,
        Variant::Fused,
        Variant::FastPath,
        Variant::Automata,
    ] {
        if v == Variant::Fused {
            let f = fused::program(program).expect("four fused programs");
            let exp = expected.clone();
            let inp = input.clone();
            let mut out = Vec::with_capacity(exp.len());
            let run: Runner = Box::new(move || {
                f(&inp, &mut out);
                if out == exp {
                    Ok(())
                } else {
                    Err("output differs from the reference".into())
                }
            });
            runners.push((v, Ok(run), Some(rust_instructions(f))));
            continue;
        }
        match machine(program, v) {
            Err(e) => runners.push((v, Err(e), None)),
            Ok(m) => {
                let size = m.code_size();
                let sz = match v {
                    Variant::Native => {
                        process_size = Some(size.processes);
                        size.processes
                    }
                    Variant::FastPath => size.processes + size.fast_paths,
                    _ => size.automaton,
                };
                let exp = expected.clone();
                let inp = input.clone();
                let cell = std::rc::Rc::new(std::cell::RefCell::new(m));
                if v == Variant::FastPath {
                    fp_machine_stats = Some(cell.clone());
                }
                let run: Runner = Box::new(move || {
                    let out =
                        filters::run(&mut cell.borrow_mut(), &inp).map_err(|e| e.to_string())?;
                    if out == exp {
                        Ok(())
                    } else {
                        Err(format!(
                            "output differs from the reference ({} bytes, expected {})",
                            out.len(),
                            exp.len()
                        ))
                    }
                });
                runners.push((v, Ok(run), Some(sz)));
            }
        }
    }

    // Check every runner once, and size each round to about round_ms.
    let mut reps = vec![1u32; runners.len()];
    for (i, (_, run, _)) in runners.iter_mut().enumerate() {
        if let Ok(r) = run {
            let t = Instant::now();
            match r() {
                Ok(()) => {
                    let ms = t.elapsed().as_secs_f64() * 1e3;
                    reps[i] = ((budget.round_ms / ms.max(1e-3)) as u32).clamp(1, 100_000);
                }
                Err(e) => *run = Err(e),
            }
        }
    }
    let fp_before = fp_machine_stats.as_ref().map(|m| m.borrow().stats());
    let mut fp_streams = 0u64;
    let mut best = vec![f64::INFINITY; runners.len()];
    let mut samples = vec![Vec::new(); runners.len()];
    let mut threads = threads::Pipeline::new(p.chain).ok_or_else(|| "cannot start".to_string());
    if let Ok(t) = &threads {
        match t.run(&input) {
            Some(out) if out == expected => {}
            Some(_) => threads = Err("output differs from the reference".into()),
            None => threads = Err("the pipeline stopped".into()),
        }
    }
    let mut thread_best = f64::INFINITY;
    let mut thread_samples = Vec::new();
    for round in 0..budget.rounds {
        for (i, (v, run, _)) in runners.iter_mut().enumerate() {
            let Ok(r) = run else { continue };
            let t = Instant::now();
            for _ in 0..reps[i] {
                if let Err(e) = r() {
                    *run = Err(e);
                    break;
                }
            }
            let ns = t.elapsed().as_secs_f64() * 1e9 / f64::from(reps[i]);
            best[i] = best[i].min(ns / bytes);
            samples[i].push(ns / bytes);
            if *v == Variant::FastPath {
                fp_streams += u64::from(reps[i]);
            }
        }
        if let (Ok(t), true) = (&threads, round < budget.peer_rounds) {
            let start = Instant::now();
            let ok = t.run(&input).as_deref() == Some(&expected[..]);
            let ns = start.elapsed().as_secs_f64() * 1e9;
            if ok {
                thread_best = thread_best.min(ns / bytes);
                thread_samples.push(ns / bytes);
            } else {
                threads = Err("output differs from the reference".into());
            }
        }
    }
    let fastpath_stats = match (fp_machine_stats, fp_before) {
        (Some(m), Some(before)) if fp_streams > 0 => {
            let after = m.borrow().stats();
            let per = |a: u64, b: u64| (a - b) as f64 / fp_streams as f64;
            Some((
                per(after.entries, before.entries),
                per(after.exits, before.exits),
                per(after.aborts, before.aborts),
            ))
        }
        _ => None,
    };

    let mut timed: Vec<(Variant, Timed)> = runners
        .into_iter()
        .enumerate()
        .map(|(i, (v, run, size))| {
            let ns_per_byte = run.map(|_| best[i]);
            let fastpath_stats = if v == Variant::FastPath {
                fastpath_stats
            } else {
                None
            };
            (
                v,
                Timed {
                    ns_per_byte,
                    samples: std::mem::take(&mut samples[i]),
                    size,
                    fastpath_stats,
                },
            )
        })
        .collect();
    timed.push((
        Variant::Threads,
        Timed {
            ns_per_byte: threads.map(|_| thread_best),
            samples: thread_samples,
            size: None,
            fastpath_stats: None,
        },
    ));
    let go_time = match go {
        Ok(peer) => peer
            .time(program, &input, &expected, GO_STREAMS, budget.peer_rounds)
            .map(|ns| ns / bytes),
        Err(why) => Err(format!("skipped: {why}")),
    };
    timed.push((
        Variant::Go,
        Timed {
            samples: go_time.iter().copied().collect(),
            ns_per_byte: go_time,
            size: None,
            fastpath_stats: None,
        },
    ));
    ProgramResult {
        name: p.name,
        chain: p.chain.join(" -> "),
        output_bytes: expected.len(),
        timed,
        process_size,
        scheduler_size: scheduler_instructions(),
    }
}
