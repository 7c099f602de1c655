//! The idl suite: IDL4's Tables 3 and 4 (Haeberlen et al., *Stub-Code
//! Performance is Becoming Important*, 2000) replicated for fastpath's
//! generated stubs and the serialization peers they are compared with:
//!
//! * [`prost_peer`], [`capnp_peer`], [`flat_peer`]: stubs of the same shape
//!   over protobuf (prost), Cap'n Proto (capnp) and FlatBuffers, from the
//!   schemas in `crates/bench/peers/idl/` (generated in `build.rs`);
//! * [`hand`]: a hand-written minimal stub;
//! * [`fastpath_family`]: fastpath's generated stubs (`idl::gen_rust`).
//!
//! [`count`] counts instructions with callgrind (Table 4); [`timing`]
//! times round trips between two processes over `idl::rt::shm` and IOzone's
//! reread (Table 3). [`report`] runs both and returns the tables with
//! ratios; `fastpath bench idl` prints it, `cargo bench -p fastpath-bench
//! --bench idl` is the criterion version.

pub mod capnp_peer;
pub mod count;
pub mod fastpath_family;
pub mod flat_peer;
pub mod hand;
pub mod prost_peer;
pub mod schema;
pub mod server;
pub mod shm;
pub mod timing;
pub mod wire;

use std::fmt::Write;

/// IDL4's Table 4: (client » server, client « server, total) per call.
pub const IDL4: [(&str, [i64; 3]); 3] = [
    ("pfs_open", [65, 37, 102]),
    ("pfs_write", [73, 38, 111]),
    ("pfs_get_direntries", [79, 42, 121]),
];

/// If this process is one of the suite's children (the callgrind-counted
/// run or a server), does that child's work and exits.
pub fn child_dispatch() {
    if std::env::var_os(count::COUNT_ENV).is_some() {
        count::child_main();
        std::process::exit(0);
    }
    if let Some(code) = shm::child_main() {
        std::process::exit(code);
    }
}

fn verdict(pass: bool) -> &'static str {
    if pass { "met" } else { "MISSED" }
}

/// Section 1: Table 4 by callgrind.
pub fn table4_section() -> String {
    let mut out = String::from(
        "\n## 1. Table 4: instructions in stubs and server loop (callgrind, exact)\n\n",
    );
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => return out + &format!("skipped: {e}\n"),
    };
    let counts = match count::measure(&exe) {
        Ok(c) => c,
        Err(e) => return out + &format!("skipped: {e}\n"),
    };
    let _ = writeln!(
        out,
        "Instructions executed per call, client » server (client marshal, dispatch, server unmarshal) / client « server (server marshal, client unmarshal) = total; the loopback carrier's own instructions (the empty call: {} / {}) subtracted, the server method excluded. Arrays of {} ints.\n",
        counts[0].dirs[0].0,
        counts[0].dirs[0].1,
        count::TABLE4_INTS
    );
    let mut head = String::from("| call | IDL4 (paper) |");
    let mut rule = String::from("|---|---:|");
    for c in &counts {
        head += &format!(" {} |", c.name);
        rule += "---:|";
    }
    head += " fastpath / prost |";
    rule += "---:|";
    let _ = writeln!(out, "{head}\n{rule}");
    let find = |n: &str| counts.iter().find(|c| c.name == n);
    let mut targets = Vec::new();
    for (k, op) in count::OPS.iter().enumerate().skip(1) {
        let paper = IDL4.iter().find(|(n, _)| n == op).map(|(_, v)| *v);
        let mut row = format!(
            "| {op} | {} |",
            paper.map_or("".into(), |p| format!("{} / {} = {}", p[0], p[1], p[2]))
        );
        for c in &counts {
            let (a, b) = c.dirs[k];
            row += &format!(" {a} / {b} = {} |", a + b);
        }
        let tot = |n: &str| find(n).map(|c| (c.dirs[k].0 + c.dirs[k].1) as f64);
        match (tot("fastpath"), tot("prost")) {
            (Some(f), Some(p)) => {
                row += &format!(" {:.0}% |", 100.0 * f / p);
                // The targets are Table 4's calls; the null call is context.
                if let Some(x) = paper {
                    targets.push((op.to_string(), f, p, x[2] as f64));
                }
            }
            _ => row += " n/a |",
        }
        let _ = writeln!(out, "{row}");
    }
    out.push('\n');
    for (op, f, p, paper) in &targets {
        let _ = writeln!(
            out,
            "- {op}: fastpath {f:.0} = {:.0}% of prost's {p:.0} (<= 50%: {}); IDL4 {paper:.0} (<= IDL4: {})",
            100.0 * f / p,
            verdict(*f <= 0.5 * p),
            verdict(*f <= *paper)
        );
    }
    if let (Some(s), Some(d)) = (find("fastpath"), find("fastpath dynamic")) {
        for (k, op) in count::OPS.iter().enumerate().skip(1) {
            let (fs, fd) = (s.dirs[k].0 + s.dirs[k].1, d.dirs[k].0 + d.dirs[k].1);
            let _ = writeln!(
                out,
                "- {op}: dynamic stubs {fd} = {:.2}x the static {fs} (<= 1.5x: {})",
                fd as f64 / fs as f64,
                verdict(fd as f64 <= 1.5 * fs as f64)
            );
        }
    }
    out
}

/// Sections 2 and 3: round trips and IOzone, timed.
pub fn timed_sections(budget: timing::Budget) -> String {
    let mut out = String::from("\n## 2. Round trips between two processes (idl::rt::shm)\n\n");
    let t = match timing::run(budget) {
        Ok(t) => t,
        Err(e) => return out + &format!("FAILED: {e}\n"),
    };
    let _ = writeln!(
        out,
        "ns per call, best of {} interleaved batches of {} calls; the server is a child process; raw = the channel's call_raw carrying fastpath's bytes with no stub.\n",
        budget.rounds, budget.batch
    );
    let mut head = String::from("| call |");
    let mut rule = String::from("|---|");
    for n in &t.names {
        head += &format!(" {n} ns | / raw |");
        rule += "---:|---:|";
    }
    let _ = writeln!(out, "{head}\n{rule}");
    for (k, call) in timing::CALLS.iter().enumerate() {
        let mut row = format!("| {call} |");
        for i in 0..t.names.len() {
            row += &format!(" {:.0} | {:.2}x |", t.ns[i][k], t.ns[i][k] / t.ns[0][k]);
        }
        let _ = writeln!(out, "{row}");
    }
    if let Some(i) = t.names.iter().position(|n| *n == "fastpath") {
        let r = t.ns[i][0] / t.ns[0][0];
        let _ = writeln!(
            out,
            "\n- null call: fastpath {:.0} ns = {r:.2}x raw {:.0} ns (<= 1.2x: {})",
            t.ns[i][0],
            t.ns[0][0],
            verdict(r <= 1.2)
        );
    }

    out += "\n## 3. IOzone reread (Table 3): 64 KiB file in a server process, 4 KiB reads, ten passes\n\n";
    let bytes = 10.0 * server::FILE_BYTES as f64;
    let _ = writeln!(
        out,
        "Best of {} runs; MB/s = 10^6 bytes/s; stub share = 1 - raw time / family time (raw: the channel with the data copied in by the server and out by the client, no stub).\n",
        budget.rounds * budget.iozone_runs
    );
    let _ = writeln!(
        out,
        "| family | MB/s | µs per 4 KiB read | stub share | / prost |\n|---|---:|---:|---:|---:|"
    );
    let prost = t
        .names
        .iter()
        .position(|n| *n == "prost")
        .map(|i| t.iozone[i]);
    for (i, n) in t.names.iter().enumerate() {
        let s = t.iozone[i];
        let _ = writeln!(
            out,
            "| {n} | {:.0} | {:.2} | {} | {} |",
            bytes / s / 1e6,
            s * 1e6 / 160.0,
            if i == 0 {
                "-".into()
            } else {
                format!("{:.0}%", 100.0 * (1.0 - t.iozone[0] / s))
            },
            prost.map_or("n/a".into(), |p| format!("{:.2}x", p / s))
        );
    }
    match &t.pread {
        Ok(s) => {
            let _ = writeln!(
                out,
                "| pread on tmpfs (kernel, context) | {:.0} | {:.2} | | {} |",
                bytes / s / 1e6,
                s * 1e6 / 160.0,
                prost.map_or("n/a".into(), |p| format!("{:.2}x", p / s))
            );
        }
        Err(e) => {
            let _ = writeln!(out, "| pread on tmpfs | failed: {e} | | | |");
        }
    }
    if let (Some(i), Some(p)) = (t.names.iter().position(|n| *n == "fastpath"), prost) {
        let r = p / t.iozone[i];
        let _ = writeln!(
            out,
            "\n- IOzone reread: fastpath {r:.2}x prost's throughput (>= 1.1x: {})",
            verdict(r >= 1.1)
        );
    }
    out
}

/// The whole suite's report (Markdown).
pub fn report(budget: timing::Budget) -> String {
    child_dispatch();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# fastpath bench idl: IDL4's Tables 3 and 4\n\nmachine: {}",
        crate::machine()
    );
    if cfg!(debug_assertions) {
        out +=
            "\nWARNING: built without optimizations; the figures are meaningless. Use --release.\n";
    }
    if !fastpath_family::available() {
        out += "\nNOTE: fastpath's generated stubs are not in this build; the peers only.\n";
    }
    out += &table4_section();
    out += &timed_sections(budget);
    out
}

#[cfg(test)]
mod tests {
    use super::server::check;
    use super::wire::Loopback;
    use super::*;

    #[test]
    fn every_peer_over_the_loopback() {
        check(&mut hand::Client {
            wire: Loopback::new(hand::Server::default(), 8192),
        })
        .unwrap();
        check(&mut prost_peer::Client {
            wire: Loopback::new(prost_peer::Server::default(), 8192),
        })
        .unwrap();
        check(&mut capnp_peer::Client {
            wire: Loopback::new(capnp_peer::Server::default(), 8192),
        })
        .unwrap();
        check(&mut flat_peer::Client::new(Loopback::new(
            flat_peer::Server::default(),
            8192,
        )))
        .unwrap();
    }

    #[test]
    fn every_subject_makes_every_call() {
        for mut s in count::subjects() {
            for op in 0..count::OPS.len() {
                s.op(op);
            }
        }
    }

    #[test]
    fn parses_combined_dumps() {
        let t = "version: 1\ncreator: x\npart: 1\ndesc: Trigger: --dump-before=idlb_method\nevents: Ir\nfn=a\n1 5\ntotals: 42\npart: 2\ndesc: Trigger: --dump-after=idlb_method\nevents: Ir\ntotals: 7\n";
        let p = count::parse_parts(t);
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].1, 42);
        assert!(p[1].0.contains("dump-after=idlb_method"));
    }
}
