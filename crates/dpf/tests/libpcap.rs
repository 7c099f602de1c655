//! Differential test against libpcap: random filters from dpf's grammar,
//! compiled by `pcap_compile` (DLT_EN10MB, optimized) and by dpf, run on
//! random realistic packets; every verdict of dpf must equal
//! `pcap_offline_filter`'s.
//!
//! `DPF_PAIRS` sets the number of (filter, packet) pairs (default 100,000,
//! the CI size), `DPF_SEED` the seed, `DPF_DEPTH` the nesting depth of
//! the filters (default 2). Without libpcap the test skips with
//! a printed reason, unless `DPF_REQUIRE_LIBPCAP=1` (set by
//! `scripts/test.sh`), when it fails.

mod common;

use std::time::Instant;

use common::{Gen, hex};
use dpf::ir::Program;
use dpf::pcap::Libpcap;

/// Packets run against each filter.
const PACKETS_PER_FILTER: usize = 100;

fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
        Err(_) => default,
    }
}

fn libpcap_or_skip() -> Option<Libpcap> {
    match Libpcap::load() {
        Ok(p) => Some(p),
        Err(e) if std::env::var("DPF_REQUIRE_LIBPCAP").as_deref() == Ok("1") => {
            panic!("DPF_REQUIRE_LIBPCAP=1 but {e}")
        }
        Err(e) => {
            eprintln!(
                "skipped: {e} (install libpcap-dev, or set DPF_REQUIRE_LIBPCAP=1 to fail instead)"
            );
            None
        }
    }
}

/// One filter as dpf compiles it, with everything that gives a verdict.
struct Compiled {
    filter: String,
    program: Program,
}

fn dpf_compile(filter: &str) -> Result<Compiled, dpf::Error> {
    Ok(Compiled {
        filter: filter.to_string(),
        program: dpf::compile(filter)?,
    })
}

/// Every verdict dpf gives for one (filter, packet) pair, by name.
fn dpf_verdicts(c: &Compiled, pkt: &[u8]) -> Vec<(&'static str, bool)> {
    vec![("reference", c.program.matches(pkt))]
}

#[test]
fn dpf_agrees_with_libpcap() {
    let Some(pcap) = libpcap_or_skip() else {
        return;
    };
    let pairs = env_u64("DPF_PAIRS", 100_000);
    let seed = env_u64("DPF_SEED", 0x00d9_f5ee_d001);
    let depth = env_u64("DPF_DEPTH", 2) as u32;
    let mut g = Gen::new(seed);
    let start = Instant::now();
    let (mut done, mut matched, mut filters, mut rejected_all) = (0u64, 0u64, 0u64, 0u64);
    let mut failures = Vec::new();
    while done < pairs {
        let filter = g.expr(depth);
        let ours = dpf_compile(&filter);
        let theirs = pcap.compile(&filter);
        let bpf = match (&ours, theirs) {
            (Ok(_), Ok(bpf)) => Some(bpf),
            // libpcap refuses a filter its optimizer proves matches
            // nothing; dpf must then match nothing either.
            (Ok(_), Err(dpf::Error::LibpcapCompile(m))) if m.contains("rejects all packets") => {
                rejected_all += 1;
                None
            }
            (Ok(_), Err(e)) => panic!("libpcap rejects {filter:?} that dpf accepts: {e}"),
            (Err(e), Ok(_)) => panic!("dpf rejects {filter:?} that libpcap accepts: {e}"),
            // Both refuse it (e.g. twelve digits pcap reads as a MAC
            // address): nothing to compare.
            (Err(_), Err(_)) => continue,
        };
        let ours = ours.expect("checked above");
        filters += 1;
        for _ in 0..PACKETS_PER_FILTER {
            let pkt = g.packet();
            let want = bpf.as_ref().is_some_and(|b| b.matches(&pkt));
            matched += u64::from(want);
            done += 1;
            for (who, got) in dpf_verdicts(&ours, &pkt) {
                if got != want && failures.len() < 10 {
                    failures.push(format!(
                        "filter {:?}\n  parsed {}\n  packet ({} bytes) {}\n  libpcap {want}, dpf {who} {got}\n  dpf program:\n{}  libpcap program:\n{}",
                        ours.filter,
                        dpf::parse(&filter).map(|e| e.to_string()).unwrap_or_default(),
                        pkt.len(),
                        hex(&pkt),
                        dpf::dump(&ours.program),
                        bpf.as_ref().map(|b| b.image()).unwrap_or_else(|| "(rejects all packets)\n".into()),
                    ));
                }
            }
        }
    }
    let fraction = matched as f64 / done as f64;
    eprintln!(
        "libpcap {}: {done} pairs over {filters} filters ({rejected_all} rejecting all), {:.1}% matching, seed {seed:#x}, {:.2?}",
        pcap.version(),
        100.0 * fraction,
        start.elapsed()
    );
    assert!(
        failures.is_empty(),
        "{} disagreements, the first:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        fraction >= 0.05,
        "only {:.1}% of pairs match: the generators are too weak",
        100.0 * fraction
    );
    assert!(
        fraction <= 0.95,
        "{:.1}% of pairs match: the generators are too weak",
        100.0 * fraction
    );
}

/// Hand-picked filters on hand-picked packets, the cases the random test
/// might reach rarely: every truncation length of a TCP/IPv4 frame with
/// options, of an IPv6 fragment and of an ARP request.
#[test]
fn every_truncation_of_typical_frames_agrees() {
    let Some(pcap) = libpcap_or_skip() else {
        return;
    };
    let mut tcp4 = vec![0u8; 14 + 24 + 20];
    tcp4[12] = 0x08;
    tcp4[14] = 0x46;
    tcp4[23] = 6;
    tcp4[26..30].copy_from_slice(&[10, 0, 0, 1]);
    tcp4[30..34].copy_from_slice(&[192, 168, 1, 1]);
    tcp4[38..40].copy_from_slice(&1024u16.to_be_bytes());
    tcp4[40..42].copy_from_slice(&80u16.to_be_bytes());
    tcp4[51] = 0x12;
    let mut frag6 = vec![0u8; 14 + 40 + 8 + 20];
    frag6[12] = 0x86;
    frag6[13] = 0xdd;
    frag6[20] = 44;
    frag6[54] = 6;
    frag6[62..64].copy_from_slice(&80u16.to_be_bytes());
    let mut arp = vec![0u8; 14 + 28];
    arp[12] = 0x08;
    arp[13] = 0x06;
    arp[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    arp[28..32].copy_from_slice(&[192, 168, 1, 1]);
    arp[38..42].copy_from_slice(&[10, 0, 0, 1]);
    let filters = [
        "tcp",
        "udp or icmp",
        "port 80",
        "tcp dst port 80",
        "src and dst port 80",
        "portrange 70-90",
        "host 10.0.0.1",
        "src net 10.0.0.0/8 and not dst host 192.168.1.1",
        "tcp[13] & 0x12 != 0",
        "tcp[13] & 0x12 = 0x12",
        "not tcp[100] = 0",
        "ip[0] & 0xf > 5",
        "ether[12:2] = 0x0800 and ip proto \\tcp",
        "ip6 or arp",
        "ether proto 0x42",
        "ether[100] = 1 or not ether[100] = 1",
        "tcp and tcp[0:2] > 1000 or udp",
        // Regressions: each of these once disagreed with libpcap.
        "not (host 192.168.1.1 and 10.0.0.1)",
        "not ip[0:2] & 0 == 39498",
        "ether[1] & 0xffffffff != 0 or ether[100] = 1",
        "((arp && sctp) or not ether[129:2] & 0x12 > 0xffff) && icmp[13:2] & 0xff >= 56616 or ip",
        "(ether[56:4] < 5 and ether proto 0x800) or not (not net 0.0.0.0/0 and tcp[3] < 80)",
    ];
    let mut n = 0;
    for f in filters {
        let ours = dpf_compile(f).unwrap_or_else(|e| panic!("{f}: {e}"));
        let bpf = pcap.compile(f).unwrap_or_else(|e| panic!("{f}: {e}"));
        for frame in [&tcp4, &frag6, &arp] {
            for len in 0..=frame.len() {
                let pkt = &frame[..len];
                let want = bpf.matches(pkt);
                for (who, got) in dpf_verdicts(&ours, pkt) {
                    assert_eq!(
                        got,
                        want,
                        "{f}: {who} on {} ({len} bytes)\n{}\n{}",
                        hex(pkt),
                        dpf::dump(&ours.program),
                        bpf.image()
                    );
                }
                n += 1;
            }
        }
    }
    eprintln!("{n} truncation pairs agree");
}
