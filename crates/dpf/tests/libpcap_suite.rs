//! libpcap's own filter expressions as the judge of dpf's language.
//!
//! `tests/data/libpcap-filters.txt` holds the Ethernet expressions of
//! libpcap's test suite (`testprogs/TESTrun`; the file's header names the
//! commit, the licence and the selection). For every expression libpcap
//! accepts and dpf accepts too, dpf (its reference interpreter, its merged
//! structure and its native classifier) must give libpcap's verdict
//! (`pcap_compile` for DLT_EN10MB, optimized, then `pcap_offline_filter`)
//! on every frame of a set that exercises it: random realistic frames, and
//! frames carrying the expression's own addresses and numbers, VLAN-tagged,
//! with broadcast and multicast MACs, truncated, and for an expression
//! with `geneve` carried in Geneve frames. Every expression libpcap
//! rejects, dpf must reject.
//!
//! Where bpf(2) is usable (root), dpf's table lowered to an XDP program
//! ([`dpf::ebpf`]) runs in the kernel by `BPF_PROG_TEST_RUN` on every
//! frame XDP can carry (14 bytes or more) and must agree too; elsewhere
//! that part is skipped with a printed reason, unless `UNET_REQUIRE_XDP=1`.
//!
//! The test prints the coverage (expressions dpf accepts, out of those
//! libpcap accepts) and fails if it falls below [`COVERAGE_FLOOR`]: a
//! primitive that stops parsing is a regression. `DPF_SUITE_VERBOSE=1`
//! lists every expression dpf rejects. Without libpcap it skips,
//! unless `DPF_REQUIRE_LIBPCAP=1` (set by `scripts/test.sh`).

mod common;

use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Instant;

use common::{Gen, dpf_compile, dpf_verdicts, hex, libpcap_or_skip};
use rand::Rng;

/// The suite, as committed.
const SUITE: &str = include_str!("data/libpcap-filters.txt");

/// The fewest expressions of libpcap's accept list dpf must accept.
const COVERAGE_FLOOR: usize = 362;

/// Random frames shared by every expression.
const SHARED_FRAMES: usize = 1_500;
/// Frames carrying an expression's own constants, per expression.
const PLANTED_FRAMES: usize = 4_000;

/// The suite's expressions: (libpcap accepts it, the expression).
fn suite() -> Vec<(bool, &'static str)> {
    SUITE
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (verdict, expr) = l.split_once('\t').expect("verdict<TAB>expression");
            match verdict {
                "accept" => (true, expr),
                "reject" => (false, expr),
                other => panic!("unknown verdict {other} in the suite"),
            }
        })
        .collect()
}

/// The constants an expression names, to be planted in frames.
#[derive(Default)]
struct Constants {
    ipv4: Vec<[u8; 4]>,
    ipv6: Vec<[u8; 16]>,
    macs: Vec<[u8; 6]>,
    numbers: Vec<u16>,
    /// Every number, full width (values of `proto[off:4]`).
    wide: Vec<u32>,
    /// DECnet addresses (`area << 10 | node`), in an expression that
    /// names `decnet`.
    decnet: Vec<u16>,
    /// The expression names ISO or IS-IS.
    iso: bool,
    /// The expression has a `geneve`.
    geneve: bool,
}

fn mac(token: &str) -> Option<[u8; 6]> {
    // Six groups of one or two hex digits, three of four, or twelve in a
    // row: each group zero-padded to its width.
    let groups: Vec<&str> = token.split([':', '.', '-']).collect();
    let width = match groups.len() {
        6 => 2,
        3 => 4,
        1 => 12,
        _ => return None,
    };
    let mut digits = String::new();
    for g in &groups {
        if g.is_empty() || g.len() > width || !g.chars().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        digits.push_str(&format!("{g:0>width$}"));
    }
    if digits.len() != 12 || (width == 12 && !token.chars().any(|c| c.is_ascii_alphabetic())) {
        return None;
    }
    let mut m = [0u8; 6];
    for (i, b) in m.iter_mut().enumerate() {
        *b = u8::from_str_radix(&digits[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(m)
}

fn constants(expr: &str) -> Constants {
    let mut c = Constants {
        geneve: expr
            .split(|ch: char| !ch.is_ascii_alphanumeric())
            .any(|w| w == "geneve"),
        iso: expr
            .split(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '-'))
            .any(|w| {
                matches!(
                    w,
                    "iso"
                        | "isis"
                        | "is-is"
                        | "clnp"
                        | "esis"
                        | "es-is"
                        | "l1"
                        | "l2"
                        | "iih"
                        | "lsp"
                        | "snp"
                        | "csnp"
                        | "psnp"
                )
            }),
        ..Constants::default()
    };
    let tokens =
        expr.split(|ch: char| !(ch.is_ascii_alphanumeric() || matches!(ch, '.' | ':' | '-')));
    for token in tokens.filter(|t| !t.is_empty()) {
        // "port 20-30", "ether[7:2]": each side counts too.
        let sides = token.split(['-', ':']).filter(|p| *p != token);
        for part in std::iter::once(token).chain(sides) {
            if let Ok(a) = part.parse::<Ipv4Addr>() {
                c.ipv4.push(a.octets());
            } else if let Ok(a) = part.parse::<Ipv6Addr>() {
                c.ipv6.push(a.octets());
            } else if let Some(m) = mac(part) {
                c.macs.push(m);
            } else if let Some(n) = parse_number(part) {
                c.wide.push(n);
                if let Ok(n) = u16::try_from(n) {
                    c.numbers.push(n);
                }
            } else if let Some(n) = protocol_name(part) {
                c.numbers.push(n);
                c.wide.push(u32::from(n));
            } else if let Some((port, _)) = dpf::services::resolve(part) {
                c.numbers.push(port);
                c.wide.push(u32::from(port));
            } else if let Some(a) = decnet_address(part).filter(|_| expr.contains("decnet")) {
                c.decnet.push(a);
            } else if part.contains('.') {
                // A partial network, "192.168": its bytes, zero-padded.
                let bytes: Option<Vec<u8>> = part.split('.').map(|b| b.parse().ok()).collect();
                if let Some(b) = bytes.filter(|b| b.len() < 4) {
                    let mut a = [0u8; 4];
                    a[..b.len()].copy_from_slice(&b);
                    c.ipv4.push(a);
                }
            }
        }
    }
    c
}

/// A DECnet address, `AREA.NODE`.
fn decnet_address(token: &str) -> Option<u16> {
    let (area, node) = token.split_once('.')?;
    let (area, node) = (area.parse::<u16>().ok()?, node.parse::<u16>().ok()?);
    (area < 64 && node < 1024).then_some(area << 10 | node)
}

/// The number a protocol or EtherType name stands for, so that frames
/// carry it (`decnet` is EtherType 0x6003, `vrrp` IP protocol 112).
fn protocol_name(name: &str) -> Option<u16> {
    Some(match name {
        "mopdl" => 0x6001,
        "moprc" => 0x6002,
        "decnet" => 0x6003,
        "lat" => 0x6004,
        "sca" => 0x6007,
        "loopback" => 0x9000,
        "igmp" => 2,
        "vrrp" | "carp" => 112,
        "icmp6" => 58,
        _ => return None,
    })
}

fn parse_number(t: &str) -> Option<u32> {
    let v = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        u32::from_str_radix(h, 16).ok()?
    } else {
        t.parse::<u32>().ok()?
    };
    Some(v)
}

/// A frame of `g`, then rewritten with one of the expression's constants
/// or a link-layer variant, and truncated a third of the time.
fn planted(g: &mut Gen, c: &Constants) -> Vec<u8> {
    let mut f = g.frame();
    let rounds = g.rng.random_range(1..=3);
    for _ in 0..rounds {
        let ty = f.get(12..14).map(|t| u16::from_be_bytes([t[0], t[1]]));
        let l3 = if ty == Some(0x8100) { 18 } else { 14 };
        match g.rng.random_range(0..10) {
            0 if !c.ipv4.is_empty() => {
                let a = c.ipv4[g.rng.random_range(0..c.ipv4.len())];
                // IPv4 source or destination, or ARP sender or target.
                let at = match ty {
                    Some(0x0806) | Some(0x8035) => *pick(g, &[28, 38]),
                    _ => l3 + *pick(g, &[12, 16]),
                };
                put(&mut f, at, &a);
            }
            1 if !c.ipv6.is_empty() => {
                let a = c.ipv6[g.rng.random_range(0..c.ipv6.len())];
                put(&mut f, l3 + *pick(g, &[8, 24]), &a);
            }
            2 if !c.macs.is_empty() => {
                let m = c.macs[g.rng.random_range(0..c.macs.len())];
                put(&mut f, *pick(g, &[0, 6]), &m);
            }
            3 if !c.numbers.is_empty() => {
                // A port, a protocol byte, an Ethernet type, a VLAN or PPPoE
                // session id.
                let n = c.numbers[g.rng.random_range(0..c.numbers.len())];
                let ihl = 4 * usize::from(f.get(l3).map_or(5, |b| b & 0xf));
                match g.rng.random_range(0..5) {
                    0 => put(&mut f, l3 + ihl + *pick(g, &[0, 2]), &n.to_be_bytes()),
                    1 => put(&mut f, l3 + 40 + *pick(g, &[0, 2]), &n.to_be_bytes()),
                    2 => put(&mut f, l3 + *pick(g, &[9, 6]), &[n as u8]),
                    3 => put(&mut f, 12, &n.to_be_bytes()),
                    _ => match ty {
                        Some(0x8100) => put(&mut f, 14, &(n & 0x0fff).to_be_bytes()),
                        // A PPPoE session id.
                        Some(0x8864) => put(&mut f, 16, &n.to_be_bytes()),
                        _ => {}
                    },
                }
            }
            4 | 8 | 9 if !c.wide.is_empty() => {
                // A value at an offset, both named by the expression
                // (`ip[0xab] == 0xcd`), from the link, network or
                // transport header, the frame grown to hold it.
                let v = *pick(g, &c.wide);
                let off = *pick(g, &c.wide) as usize;
                let ihl = 4 * usize::from(f.get(l3).map_or(5, |b| b & 0xf));
                let at = off + *pick(g, &[0, l3, l3 + ihl, l3 + 40]);
                let bytes = v.to_be_bytes();
                let width = if v > 0xffff {
                    4
                } else {
                    *pick(g, &[1usize, 2, 4])
                };
                if at < 1024 {
                    if f.len() < at + width {
                        f.resize(at + width, 0);
                    }
                    put(&mut f, at, &bytes[4 - width..]);
                }
            }
            4 => put(&mut f, 0, &[0xff; 6]),
            5 => {
                let m = *pick(g, &[[0x01, 0x00, 0x5e, 0, 0, 1], [0x33, 0x33, 0, 0, 0, 1]]);
                put(&mut f, 0, &m);
            }
            7 if !c.decnet.is_empty() => f = g.decnet(&c.decnet),
            7 if c.iso => {
                // 802.3 with the ISO SAPs: a network-layer protocol id
                // and an IS-IS PDU type, the expression's numbers or
                // ISO's own.
                let byte = |g: &mut Gen, own: &[u8]| {
                    if !c.numbers.is_empty() && g.rng.random_bool(0.5) {
                        *pick(g, &c.numbers) as u8
                    } else {
                        *pick(g, own)
                    }
                };
                let length = 3 + 8 + g.rng.random_range(0..8u16);
                let mut iso = f.get(..12).map_or(vec![0; 12], <[u8]>::to_vec);
                iso.extend(length.to_be_bytes());
                iso.extend([0xfe, 0xfe, 0x03]);
                iso.resize(14 + usize::from(length), 0);
                iso[17] = byte(g, &[0x81, 0x82, 0x83, 0x83]);
                iso[21] = byte(g, &[15, 16, 17, 18, 20, 24, 25, 26, 27]);
                f = iso;
            }
            6 if f.len() >= 14 => {
                // 802.1Q tag in front of the Ethernet type.
                let tag = [0x81, 0x00, g.rng.random_range(0..0x10), g.rng.random()];
                f.splice(12..12, tag);
            }
            _ => {
                // IPv4 multicast or broadcast destinations.
                let a = *pick(g, &[[224, 0, 0, 1], [255, 255, 255, 255], [239, 1, 2, 3]]);
                put(&mut f, l3 + 16, &a);
            }
        }
    }
    // An expression with `geneve` reads the packet a Geneve frame
    // carries: most of its frames carry the frame built above, with one
    // of its numbers as the VNI now and then.
    if c.geneve && g.rng.random_bool(0.8) {
        let vni = if !c.wide.is_empty() && g.rng.random_bool(0.5) {
            *pick(g, &c.wide)
        } else {
            g.rng.random_range(0..16)
        };
        f = g.geneve(&f, vni);
    }
    if g.rng.random_bool(0.35) {
        let cut = g.rng.random_range(0..=f.len());
        f.truncate(cut);
    }
    f
}

fn pick<'a, T>(g: &mut Gen, xs: &'a [T]) -> &'a T {
    &xs[g.rng.random_range(0..xs.len())]
}

fn put(f: &mut [u8], at: usize, bytes: &[u8]) {
    if let Some(dst) = f.get_mut(at..at + bytes.len()) {
        dst.copy_from_slice(bytes);
    }
}

#[test]
fn libpcap_suite_agrees_and_coverage_holds() {
    let Some(pcap) = libpcap_or_skip() else {
        return;
    };
    let start = Instant::now();
    let mut g = Gen::new(0x11b_9ca9);
    let shared: Vec<Vec<u8>> = (0..SHARED_FRAMES).map(|_| g.packet()).collect();
    let (mut total, mut accepted, mut pairs, mut matched) = (0usize, 0usize, 0u64, 0u64);
    let mut kernel_pairs = 0u64;
    let mut host_refused = Vec::new();
    let mut uniform = Vec::new();
    let mut failures = Vec::new();
    let mut rejected = std::collections::BTreeMap::<String, usize>::new();
    for (libpcap_accepts, expr) in suite() {
        let ours = dpf_compile(expr, true);
        if !libpcap_accepts {
            if ours.is_ok() {
                failures.push(format!(
                    "dpf accepts «{expr}», which libpcap's suite rejects"
                ));
            }
            continue;
        }
        total += 1;
        let ours = match ours {
            Ok(c) => c,
            Err(e) => {
                let why = e.to_string();
                if std::env::var_os("DPF_SUITE_VERBOSE").is_some() {
                    eprintln!("  dpf rejects «{expr}»: {why}");
                }
                let key = why
                    .split(':')
                    .next_back()
                    .unwrap_or(&why)
                    .trim()
                    .to_string();
                *rejected.entry(key).or_default() += 1;
                continue;
            }
        };
        accepted += 1;
        if let Some(why) = ours.xdp.as_ref().and_then(|x| x.fallback()) {
            failures.push(format!("«{expr}» was not lowered to eBPF: {why}"));
        }
        let bpf = match pcap.compile(expr) {
            Ok(b) => Some(b),
            // libpcap's optimizer proved the expression matches nothing.
            Err(dpf::Error::LibpcapCompile(m)) if m.contains("rejects all packets") => None,
            Err(e) => {
                host_refused.push(format!("«{expr}»: {e}"));
                continue;
            }
        };
        let c = constants(expr);
        let mut own = Gen::new(
            0x5eed
                ^ expr.len() as u64
                ^ (u64::from(expr.bytes().map(u32::from).sum::<u32>()) << 16),
        );
        let planted: Vec<Vec<u8>> = (0..PLANTED_FRAMES).map(|_| planted(&mut own, &c)).collect();
        let mut disagreed = false;
        let mut hits = 0usize;
        for pkt in shared.iter().chain(&planted) {
            let want = bpf.as_ref().is_some_and(|b| b.matches(pkt));
            matched += u64::from(want);
            hits += usize::from(want);
            pairs += 1;
            for (who, got) in dpf_verdicts(&ours, pkt) {
                kernel_pairs += u64::from(who == "eBPF");
                if got != want && !disagreed {
                    disagreed = true;
                    failures.push(format!(
                        "«{expr}»: libpcap {want}, dpf {who} {got} on {} bytes {}\n  dpf program:\n{}  libpcap program:\n{}",
                        pkt.len(),
                        hex(pkt),
                        dpf::dump(&ours.program),
                        bpf.as_ref().map(|b| b.image()).unwrap_or_else(|| "(rejects all packets)\n".into()),
                    ));
                }
            }
        }
        if hits == 0 || hits == SHARED_FRAMES + PLANTED_FRAMES {
            uniform.push(format!(
                "«{expr}» ({})",
                if hits == 0 { "none" } else { "all" }
            ));
        }
    }
    eprintln!(
        "libpcap {} suite: dpf accepts {accepted} of {total} expressions ({:.0}%), \
         identical on {pairs} (expression, frame) pairs ({kernel_pairs} of them run in the kernel \
         as eBPF too), {:.1}% matching, {:.2?}",
        pcap.version(),
        100.0 * accepted as f64 / total as f64,
        100.0 * matched as f64 / pairs.max(1) as f64,
        start.elapsed(),
    );
    eprintln!(
        "  {} expressions match no frame or every frame: {}",
        uniform.len(),
        uniform.join(", ")
    );
    let mut reasons: Vec<_> = rejected.into_iter().collect();
    reasons.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    for (why, n) in reasons.iter().take(60) {
        eprintln!("  rejected {n:>3}: {why}");
    }
    assert!(
        host_refused.is_empty(),
        "libpcap on this host refuses expressions its suite accepts and dpf accepts:\n{}",
        host_refused.join("\n")
    );
    assert!(
        failures.is_empty(),
        "{} disagreements:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        accepted >= COVERAGE_FLOOR,
        "dpf accepts {accepted} of libpcap's {total} suite expressions, below the floor of {COVERAGE_FLOOR}"
    );
}
