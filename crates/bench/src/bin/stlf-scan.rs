//! Finds loads the store buffer cannot forward: a load that reads bytes a
//! store wrote a few instructions before, but not all from one store (two
//! 4-byte stores read back as one 8-byte load, a struct written field by
//! field and copied in 16-byte pieces). Such a load waits until the stores
//! reach the L1 cache, some tens of cycles on x86-64, a stall that no
//! instruction count (callgrind) shows and that, without a PMU (`perf stat`
//! on a KVM guest without one), no counter names either.
//!
//! ```sh
//! cargo build --release -p fastpath-bench --bin stlf-scan --bin unet-count
//! target/release/stlf-scan 1024 3072 1 -- target/release/unet-count standard-40 @N@
//! ONLY_ONE=1 STD=1 target/release/stlf-scan 20 60 50 -- target/release/examples/loop_rtt @N@ 0
//! ```
//!
//! It runs the command twice under `valgrind --tool=lackey --trace-mem=yes`,
//! with `@N@` replaced by the first and then the second count, and scans
//! each trace: for every load, the bytes a store made within the last
//! [`WINDOW`] instructions wrote. A load some of whose bytes such a store
//! wrote and others not, or whose bytes two stores wrote, is a candidate.
//! The second run's candidates less the first's, over `(n2 − n1) × units`
//! (`units`: the work units, messages or round trips, of one count), are the
//! steady state's per unit, with the set-up's cancelled. Each is printed with
//! the source lines (`addr2line`) of the load and of the stores it reads.
//!
//! The model is the rule every x86-64 core shares (a load is forwarded
//! from one older store that covers it), not any core's exact one; the
//! window stands for the stores still in the store buffer. A candidate is
//! where to look, and the time saved is measured, not assumed.
//!
//! Addresses: valgrind maps a position-independent executable at
//! `0x108000` (its fixed load address on amd64), subtracted before
//! `addr2line`; addresses in the generated code (an anonymous mapping) and in
//! shared libraries (both from `0x4000000` up) are printed without a source
//! line.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

/// Instructions after a store within which a load may still find it in the
/// store buffer.
const WINDOW: u64 = 120;

/// Where valgrind maps a position-independent executable on amd64.
const PIE_BASE: u64 = 0x108000;

/// Where valgrind starts the client's other mappings on amd64 (shared
/// libraries, the anonymous ones the generated code lives in): an address
/// from here up is not the executable's.
const MMAP_BASE: u64 = 0x400_0000;

/// One candidate load's count and the stores (instruction addresses) its
/// bytes came from, the first two.
#[derive(Default, Clone, Copy)]
struct Hit {
    n: u64,
    stores: [u64; 2],
}

/// The youngest store of one byte: the instruction's sequence number and
/// address.
#[derive(Clone, Copy)]
struct Wrote {
    seq: u64,
    ins: u64,
}

/// Scans one lackey trace: candidates by the load's instruction address.
fn scan(trace: impl BufRead) -> HashMap<u64, Hit> {
    let mut bytes: HashMap<u64, Wrote> = HashMap::new();
    let mut hits: HashMap<u64, Hit> = HashMap::new();
    let (mut seq, mut ins) = (0u64, 0u64);
    for line in trace.lines().map_while(Result::ok) {
        let Some((kind, addr, size)) = parse(&line) else {
            continue;
        };
        match kind {
            'I' => {
                seq += 1;
                ins = addr;
                // Forget what no load can reach any more, now and then, so
                // that the map stays the size of the recent stores.
                if seq & 0xffff == 0 {
                    bytes.retain(|_, w| seq - w.seq <= WINDOW);
                }
                continue;
            }
            'L' | 'M' => {
                let mut covered = 0;
                let mut from: Option<Wrote> = None;
                let mut second = None;
                for a in addr..addr + size {
                    if let Some(w) = bytes.get(&a).filter(|w| seq - w.seq <= WINDOW) {
                        covered += 1;
                        match from {
                            None => from = Some(*w),
                            Some(f) if f.seq != w.seq && second.is_none() => second = Some(w.ins),
                            Some(_) => {}
                        }
                    }
                }
                if covered > 0 && (covered < size || second.is_some()) {
                    let h = hits.entry(ins).or_default();
                    h.n += 1;
                    h.stores = [from.map_or(0, |f| f.ins), second.unwrap_or(0)];
                }
            }
            _ => {}
        }
        if kind == 'S' || kind == 'M' {
            for a in addr..addr + size {
                bytes.insert(a, Wrote { seq, ins });
            }
        }
    }
    hits
}

/// The widest access lackey reports (an AVX-512 load or store): a line
/// with more is not lackey's, and is skipped.
const MAX_ACCESS: u64 = 64;

/// A lackey line: `I  addr,size`, ` L addr,size`, ` S addr,size`,
/// ` M addr,size`; `None` for any other line, and for an access wider
/// than [`MAX_ACCESS`] or one past the end of the address space.
fn parse(line: &str) -> Option<(char, u64, u64)> {
    let t = line.trim_start();
    let mut chars = t.chars();
    let kind = chars.next()?;
    if !matches!(kind, 'I' | 'L' | 'S' | 'M') || line.starts_with("==") {
        return None;
    }
    let (a, s) = chars.as_str().trim().split_once(',')?;
    let addr = u64::from_str_radix(a, 16).ok()?;
    let size: u64 = s.trim().parse().ok()?;
    (size <= MAX_ACCESS && addr.checked_add(size).is_some()).then_some((kind, addr, size))
}

/// Runs `cmd` with `@N@` made `n` under lackey and scans its trace.
fn run(cmd: &[String], n: u64) -> Result<HashMap<u64, Hit>, String> {
    let args: Vec<String> = cmd
        .iter()
        .map(|a| a.replace("@N@", &n.to_string()))
        .collect();
    // The trace on descriptor 3, the command's own output discarded.
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(
            r#"valgrind --tool=lackey --trace-mem=yes --log-fd=3 "$@" 3>&1 >/dev/null 2>/dev/null"#,
        )
        .arg("sh")
        .args(&args)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("valgrind: {e} (is it installed?)"))?;
    let out = child.stdout.take().ok_or("valgrind: no output")?;
    let hits = scan(BufReader::new(out));
    let status = child.wait().map_err(|e| format!("valgrind: {e}"))?;
    if !status.success() {
        return Err(format!("valgrind {}: {status}", args.join(" ")));
    }
    Ok(hits)
}

/// `addr2line`'s inlined frames of `addr` in `exe`, with the standard
/// library's left out, joined; empty outside the executable.
fn source(exe: &str, addr: u64) -> String {
    if !(PIE_BASE..MMAP_BASE).contains(&addr) {
        return String::new();
    }
    let Ok(out) = Command::new("addr2line")
        .args([
            "-f",
            "-i",
            "-C",
            "-e",
            exe,
            &format!("{:#x}", addr - PIE_BASE),
        ])
        .output()
    else {
        return String::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.contains("/rustc/"))
        .take(6)
        .collect::<Vec<_>>()
        .join(" | ")
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: stlf-scan <n1> <n2> <units per n> -- <command> <args, @N@ for the count>";
    let Some(dash) = args.iter().position(|a| a == "--") else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let cmd = &args[dash + 1..];
    let (Some(n1), Some(n2), Some(units), 3, Some(exe)) = (
        args.first().and_then(|a| a.parse::<u64>().ok()),
        args.get(1).and_then(|a| a.parse::<u64>().ok()),
        args.get(2).and_then(|a| a.parse::<f64>().ok()),
        dash,
        cmd.first(),
    ) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    if n2 <= n1 || !(units > 0.0 && units.is_finite()) {
        eprintln!("stlf-scan: need n1 < n2 and units > 0 ({usage})");
        std::process::exit(2);
    }
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| run(cmd, n1));
        let b = s.spawn(|| run(cmd, n2));
        (a.join().expect("scan"), b.join().expect("scan"))
    });
    let (a, b) = match (a, b) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("stlf-scan: {e}");
            std::process::exit(1);
        }
    };
    let per = (n2 - n1) as f64 * units;
    let mut rows: Vec<(f64, u64, Hit)> = b
        .iter()
        .filter_map(|(&ins, h)| {
            let d = h.n.saturating_sub(a.get(&ins).map_or(0, |x| x.n));
            (d > 0).then(|| (d as f64 / per, ins, *h))
        })
        .collect();
    rows.sort_by(|x, y| y.0.total_cmp(&x.0));
    let total: f64 = rows.iter().map(|r| r.0).sum();
    let mut out = format!("candidates per unit: {total:.2}\n");
    for (v, ins, h) in rows.iter().take_while(|r| r.0 >= 0.05) {
        out += &format!("{v:6.2}  load  {ins:#x} {}\n", source(exe, *ins));
        for s in h.stores.iter().filter(|&&s| s != 0) {
            out += &format!("        store {s:#x} {}\n", source(exe, *s));
        }
    }
    // A reader that stops early (`| head`) is not an error.
    let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), out.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The candidates a trace's text makes, by the load's instruction.
    fn hits(trace: &str) -> Vec<(u64, u64)> {
        let mut v: Vec<(u64, u64)> = scan(trace.as_bytes())
            .into_iter()
            .map(|(ins, h)| (ins, h.n))
            .collect();
        v.sort_unstable();
        v
    }

    #[test]
    fn a_wide_load_of_two_narrow_stores_is_a_candidate() {
        // Two 4-byte stores, then one 8-byte load of both (at 0x30), and an
        // 8-byte store read back whole (at 0x50): only the first counts.
        let trace = "==1== Lackey\n\
                     I  10,4\n S 1000,4\n\
                     I  14,4\n S 1004,4\n\
                     I  30,4\n L 1000,8\n\
                     I  40,4\n S 2000,8\n\
                     I  50,4\n L 2000,8\n\
                     I  54,4\n L 2004,4\n";
        assert_eq!(hits(trace), vec![(0x30, 1)]);
    }

    #[test]
    fn a_load_a_store_covers_in_part_is_a_candidate() {
        // A 16-byte load of which a recent 8-byte store wrote half (the
        // rest from the cache), and a modify (`M`) that reads like a load.
        let trace = "I  10,4\n S 1000,8\n\
                     I  20,4\n L 1000,16\n\
                     I  24,4\n S 3000,2\n\
                     I  28,4\n M 3000,4\n";
        assert_eq!(hits(trace), vec![(0x20, 1), (0x28, 1)]);
    }

    #[test]
    fn a_store_older_than_the_window_is_not_in_the_store_buffer() {
        let mut trace = String::from("I  10,4\n S 1000,4\nI  14,4\n S 1004,4\n");
        for i in 0..WINDOW {
            trace += &format!("I  {:x},4\n", 0x100 + 4 * i);
        }
        trace += "I  30,4\n L 1000,8\n";
        assert_eq!(hits(&trace), vec![]);
    }

    #[test]
    fn lackey_lines_are_parsed_and_others_skipped() {
        assert_eq!(parse("I  04017a0,3"), Some(('I', 0x4017a0, 3)));
        assert_eq!(parse(" S 1ffefffd38,8"), Some(('S', 0x1ffefffd38, 8)));
        assert_eq!(parse(" M 0421c50,4"), Some(('M', 0x421c50, 4)));
        assert_eq!(parse("==123== Command: x"), None);
        assert_eq!(parse(" L zz,8"), None);
        // Not lackey's: wider than any access, or past the address space.
        assert_eq!(parse(" L 1000,65"), None);
        assert_eq!(parse(" S ffffffffffffffff,8"), None);
    }
}
