//! `geneve`, against libpcap 1.10's verdicts.
//!
//! libpcap 1.10's `gen_geneve` matches IPv4 or IPv6 UDP to port 6081
//! whose Geneve header has version 0 (and the VNI, if one is given), and
//! reads every primitive after it in the encapsulated packet, at offsets
//! computed at run time from the outer IPv4 header's length, the Geneve
//! option length and the protocol type (an Ethernet frame for 0x6558,
//! else a packet whose "EtherType" is the protocol type). It also turns
//! the optimizer off for the whole filter. Every dpf verdict (the
//! reference evaluator, the merged structure, the native classifier and,
//! where bpf(2) is usable, the table lowered to XDP) must be libpcap's,
//! on crafted Geneve frames cut at every length and on random filters
//! inside `geneve` over random frames carried in Geneve frames and then
//! mutated.

mod common;

use common::{
    Compiled, Gen, dpf_compile, dpf_verdicts, hex, libpcap_or_skip, new_table, xdp_usable,
};
use dpf::ebpf::{OnAccept, XdpProgram};
use dpf::merge::Merged;
use rand::Rng;

/// [`dpf_compile`], whose XDP program must not have fallen back to the
/// every-frame program: dpf lowers every Geneve load.
fn compiled(filter: &str, with_xdp: bool) -> Result<Compiled, dpf::Error> {
    let c = dpf_compile(filter, with_xdp)?;
    if let Some(x) = &c.xdp {
        assert!(
            x.fallback().is_none(),
            "«{filter}» fell back: {:?}",
            x.fallback()
        );
    }
    Ok(c)
}

/// A random Geneve frame's outer headers and what it carries: one of the
/// generator's frames, whole under 0x6558 (Transparent Ethernet
/// Bridging) or bare under its EtherType; IPv6 outside with probability
/// `v6`, else IPv4 now and then with options; a VNI of `vnis`; the
/// Geneve header's first byte now and then random (its option length).
fn random_outer(g: &mut Gen, v6: f64, vnis: &[u32]) -> (Outer, Vec<u8>) {
    let mut inner = g.frame();
    let v6 = g.rng.random_bool(v6);
    let teb = g.rng.random_bool(0.6) || inner.len() < 14;
    let proto = if teb {
        0x6558
    } else {
        u16::from_be_bytes([inner[12], inner[13]])
    };
    if !teb {
        inner.drain(..14);
    }
    let mut o = if v6 {
        Outer::v6(proto)
    } else {
        Outer::v4(proto)
    };
    o.vni = vnis[g.rng.random_range(0..vnis.len())];
    if g.rng.random_bool(0.3) {
        o.first = g.rng.random_range(0..64);
    }
    if !v6 && g.rng.random_bool(0.2) {
        o.ihl = Some(g.rng.random_range(5..=15));
    }
    (o, inner)
}

/// How a Geneve frame is built.
#[derive(Clone)]
struct Outer {
    /// IPv4 with this IHL (5 to 15), or IPv6.
    ihl: Option<u8>,
    /// Link-layer encapsulation before the outer IP header.
    encap: Encap,
    /// A fragment (IPv4: offset or MF set).
    fragment: bool,
    /// The UDP destination port.
    port: u16,
    /// The Geneve header's first byte: version (2 bits) and option length
    /// in 4-byte words (6 bits).
    first: u8,
    /// The protocol type.
    proto: u16,
    /// The VNI.
    vni: u32,
}

#[derive(Clone, Copy, PartialEq)]
enum Encap {
    None,
    Vlan(u16),
    Pppoes(u16),
    Mpls(u32),
}

impl Outer {
    fn v4(proto: u16) -> Self {
        Outer {
            ihl: Some(5),
            encap: Encap::None,
            fragment: false,
            port: 6081,
            first: 0,
            proto,
            vni: 12345,
        }
    }

    fn v6(proto: u16) -> Self {
        Outer {
            ihl: None,
            ..Outer::v4(proto)
        }
    }

    /// The frame carrying `inner` (an Ethernet frame for protocol 0x6558,
    /// else what follows the protocol's header).
    fn frame(&self, inner: &[u8], fill: u8) -> Vec<u8> {
        let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2];
        let ip_type: u16 = if self.ihl.is_some() { 0x0800 } else { 0x86dd };
        match self.encap {
            Encap::None => f.extend(ip_type.to_be_bytes()),
            Encap::Vlan(id) => {
                f.extend([0x81, 0x00]);
                f.extend(id.to_be_bytes());
                f.extend(ip_type.to_be_bytes());
            }
            Encap::Pppoes(id) => {
                f.extend([0x88, 0x64, 0x11, 0x00]);
                f.extend(id.to_be_bytes());
                f.extend([0x00, 0x00]);
                let ppp: u16 = if self.ihl.is_some() { 0x21 } else { 0x57 };
                f.extend(ppp.to_be_bytes());
            }
            Encap::Mpls(label) => {
                f.extend([0x88, 0x47]);
                f.extend((label << 12 | 0x100 | 64).to_be_bytes());
            }
        }
        let options = usize::from(self.first & 0x3f) * 4;
        let udp_len = (8 + 8 + options + inner.len()) as u16;
        match self.ihl {
            Some(ihl) => {
                let frag: u16 = if self.fragment { 0x2000 } else { 0x4000 };
                let total = (usize::from(ihl) * 4) as u16 + udp_len;
                f.extend([0x40 | ihl, 0]);
                f.extend(total.to_be_bytes());
                f.extend([0, 1]);
                f.extend(frag.to_be_bytes());
                f.extend([64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
                f.extend(std::iter::repeat_n(
                    fill,
                    usize::from(ihl.saturating_sub(5)) * 4,
                ));
            }
            None => {
                f.extend([0x60, 0, 0, 0]);
                f.extend(udp_len.to_be_bytes());
                f.extend([if self.fragment { 44 } else { 17 }, 64]);
                f.extend([0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
                f.extend([0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
            }
        }
        f.extend(40000u16.to_be_bytes());
        f.extend(self.port.to_be_bytes());
        f.extend(udp_len.to_be_bytes());
        f.extend([0, 0]);
        f.extend([self.first, 0]);
        f.extend(self.proto.to_be_bytes());
        f.extend(&(self.vni << 8).to_be_bytes());
        f.extend(std::iter::repeat_n(fill, options));
        f.extend(inner);
        f
    }
}

/// A TCP/IPv4 packet from 10.0.0.1:1234 to 10.0.0.2:80, with `ihl`.
fn tcp4(ihl: u8) -> Vec<u8> {
    let mut p = vec![0x40 | ihl, 0, 0, 60, 0, 1, 0x40, 0, 64, 6, 0, 0];
    p.extend([10, 0, 0, 1, 10, 0, 0, 2]);
    p.extend(std::iter::repeat_n(1, usize::from(ihl - 5) * 4));
    p.extend([
        0x04, 0xd2, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff,
    ]);
    p.extend([0; 4]);
    p
}

/// A UDP/IPv6 packet from 2001:db8::1 to ff02::1, port 53.
fn udp6() -> Vec<u8> {
    let mut p = vec![0x60, 0, 0, 0, 0, 8, 17, 64];
    p.extend([0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    p.extend([0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    p.extend([0x13, 0x88, 0, 53, 0, 8, 0, 0]);
    p
}

/// `payload` behind an Ethernet header of `ty`, to `dst`, optionally
/// behind an 802.1Q tag of VLAN `vlan`.
fn ether(dst: [u8; 6], vlan: Option<u16>, ty: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend([0x00, 0x11, 0x22, 0x33, 0x44, 0x55]);
    if let Some(id) = vlan {
        f.extend([0x81, 0x00]);
        f.extend(id.to_be_bytes());
    }
    f.extend(ty.to_be_bytes());
    f.extend(payload);
    f
}

/// The crafted frames: every outer layout, option lengths up to the
/// maximum, Ethernet and bare inner packets, tags inside and out.
fn crafted() -> Vec<Vec<u8>> {
    let bcast = [0xff; 6];
    let host = [0x00, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e];
    let inner_eth = ether(host, None, 0x0800, &tcp4(5));
    let inner_eth_opts = ether(bcast, None, 0x0800, &tcp4(7));
    let inner_vlan = ether(host, Some(10), 0x0800, &tcp4(5));
    let inner_vlan6 = ether(bcast, Some(10), 0x86dd, &udp6());
    let inner_arp = ether(
        bcast,
        None,
        0x0806,
        &[0, 1, 8, 0, 6, 4, 0, 1, 0, 0, 0, 0, 0, 0, 10, 0, 0, 1],
    );
    let mut frames = Vec::new();
    for v6 in [false, true] {
        let base = |proto| {
            if v6 {
                Outer::v6(proto)
            } else {
                Outer::v4(proto)
            }
        };
        frames.push(base(0x6558).frame(&inner_eth, 0));
        frames.push(base(0x6558).frame(&inner_vlan, 0));
        frames.push(base(0x6558).frame(&inner_vlan6, 0));
        frames.push(base(0x6558).frame(&inner_arp, 0));
        frames.push(base(0x0800).frame(&tcp4(5), 0));
        frames.push(base(0x0800).frame(&tcp4(6), 0));
        frames.push(base(0x86dd).frame(&udp6(), 0));
        // Option lengths, up to the most the 6 bits say (252 bytes).
        for words in [1, 2, 5, 63] {
            let mut o = base(0x6558);
            o.first = words;
            frames.push(o.frame(&inner_eth_opts, 0x45));
            let mut o = base(0x0800);
            o.first = words;
            frames.push(o.frame(&tcp4(5), 0x46));
        }
        // Version bits set, and one of the critical/OAM flags.
        for first in [0x40, 0x80, 0xc1] {
            let mut o = base(0x6558);
            o.first = first;
            frames.push(o.frame(&inner_eth, 0));
        }
        // Another port, another VNI, a fragment.
        let mut o = base(0x6558);
        o.port = 6082;
        frames.push(o.frame(&inner_eth, 0));
        let mut o = base(0x6558);
        o.vni = 5;
        frames.push(o.frame(&inner_vlan, 0));
        let mut o = base(0x6558);
        o.fragment = true;
        frames.push(o.frame(&inner_eth, 0));
        // Outer encapsulations.
        for encap in [Encap::Vlan(10), Encap::Pppoes(27), Encap::Mpls(100)] {
            let mut o = base(0x6558);
            o.encap = encap;
            frames.push(o.frame(&inner_eth, 0));
            let mut o = base(0x0800);
            o.encap = encap;
            o.first = 2;
            frames.push(o.frame(&tcp4(5), 0x45));
        }
    }
    // 802.3 with an LLC header, carried whole and bare (the protocol
    // type then a length, the DSAP in the VNI's first byte).
    let llc = [0x42, 0x42, 0x03, 0, 0, 0, 0, 0];
    frames.push(Outer::v4(0x6558).frame(&ether(bcast, None, 8, &llc), 0));
    let mut o = Outer::v6(0x0008);
    o.vni = 0x42_0000;
    frames.push(o.frame(&llc, 0));
    // IPv4 outer headers with options.
    for ihl in [6, 15] {
        let mut o = Outer::v4(0x6558);
        o.ihl = Some(ihl);
        frames.push(o.frame(&inner_eth, 0x47));
        let mut o = Outer::v4(0x0800);
        o.ihl = Some(ihl);
        o.first = 3;
        frames.push(o.frame(&tcp4(6), 0x45));
    }
    frames
}

/// The filters the crafted frames are run through.
const FILTERS: &[&str] = &[
    "geneve",
    "geneve 12345",
    "geneve 5",
    "not geneve",
    "geneve 0",
    "geneve and ip",
    "geneve and ip6",
    "geneve and arp",
    "geneve and ip host 10.0.0.1",
    "geneve and host 10.0.0.2",
    "geneve and tcp port 80",
    "geneve and udp port 53",
    "geneve and (port 80 or udp)",
    "geneve and tcp[13] & 2 != 0",
    "geneve and tcp[tcpflags] & tcp-syn != 0",
    "geneve and ip[0] & 0xf > 5",
    "geneve and ether[0] = 0xff",
    "geneve and ether[12:2] = 0x800",
    "geneve and ether host 00:0a:0b:0c:0d:0e",
    "geneve and ether src 00:11:22:33:44:55",
    "geneve and broadcast",
    "geneve and multicast",
    "geneve and not broadcast",
    "geneve and vlan",
    "geneve 5 and vlan 10",
    "geneve and vlan 10 and tcp port 80",
    "geneve and vlan and ip6 and udp",
    "geneve and (ip or ip6)",
    "geneve and not ip",
    "geneve and len > 100",
    "geneve and ip[ip[0] & 0xf] = 0",
    "geneve and tcp[(tcp[12] >> 4) * 4 - 1] >= 0",
    "geneve and icmp6[0] = 1",
    "geneve and ip6 multicast",
    "geneve and ip multicast",
    "geneve and ip proto 6",
    "geneve and proto 17",
    "geneve and llc",
    "geneve and llc u",
    "geneve and stp",
    "geneve and ether proto 170",
    "geneve and iso proto 0x83",
    "geneve and netbeui",
    "geneve and ether proto 0x6558",
    "geneve and len / (ip[1] & 1) > 0",
    "geneve and len % (tcp[1] & 1) = 0",
    "ip and geneve",
    "ip6 or geneve 12345",
    "udp port 6081 and geneve and tcp",
    "vlan and geneve and ip",
    "vlan 10 and geneve 12345 and tcp port 80",
    "pppoes and geneve and tcp",
    "pppoes 27 and geneve",
    "pppoes and geneve and vlan 10 and tcp",
    "tcp and geneve",
    "ether host 02:00:00:00:00:01 and geneve and ether host 00:0a:0b:0c:0d:0e",
];

#[test]
fn crafted_geneve_frames_agree_with_libpcap_at_every_length() {
    let Some(pcap) = libpcap_or_skip() else {
        return;
    };
    let frames = crafted();
    let mut failures = Vec::new();
    let (mut pairs, mut matched) = (0u64, 0u64);
    for filter in FILTERS {
        let bpf = pcap
            .compile(filter)
            .unwrap_or_else(|e| panic!("libpcap refuses «{filter}»: {e}"));
        let ours = compiled(filter, true).unwrap_or_else(|e| panic!("dpf refuses «{filter}»: {e}"));
        for frame in &frames {
            for cut in 0..=frame.len() {
                let pkt = &frame[..cut];
                let want = bpf.matches(pkt);
                pairs += 1;
                matched += u64::from(want);
                for (who, got) in dpf_verdicts(&ours, pkt) {
                    if got != want && failures.len() < 10 {
                        failures.push(format!(
                            "«{filter}», {cut} of {} bytes {}: libpcap {want}, dpf {who} {got}\n{}",
                            frame.len(),
                            hex(pkt),
                            dpf::dump(&ours.program)
                        ));
                    }
                }
            }
        }
    }
    eprintln!(
        "{} filters, {} frames at every length: {pairs} pairs, {matched} matching",
        FILTERS.len(),
        frames.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        matched > pairs / 20,
        "too few matches: {matched} of {pairs}"
    );
}

/// libpcap reads what follows `geneve` at offsets only a matching
/// `geneve` sets (in scratch memory its interpreter leaves uninitialised):
/// where a primitive after it can run without that, dpf refuses the
/// filter, naming the `geneve`.
#[test]
fn primitives_reached_without_the_geneve_match_are_refused() {
    for filter in [
        "geneve or ip",
        "not geneve and tcp",
        "(geneve and ip) or tcp",
        "ip or geneve and tcp",
        "not (geneve and ip) and udp",
        "geneve or vlan",
        "geneve 1 or ether host 1:2:3:4:5:6",
        // What dpf leaves out around a `geneve`.
        "geneve and geneve",
        "geneve and mpls",
        "geneve and pppoes",
        "mpls and geneve",
    ] {
        let e = dpf::compile(filter).expect_err(filter);
        assert!(
            matches!(e, dpf::Error::Unsupported { .. }) && e.to_string().contains("geneve"),
            "«{filter}»: {e}"
        );
    }
    for filter in [
        "geneve and ip",
        "geneve and (ip or tcp)",
        "not (not geneve or not ip)",
        "(geneve and ip) and tcp",
        "ip or geneve",
        "geneve and not ip and tcp",
        "geneve and (ip and tcp or ip6)",
    ] {
        dpf::compile(filter).unwrap_or_else(|e| panic!("«{filter}»: {e}"));
    }
}

/// The random generator's filters inside `geneve` (with a VNI, behind an
/// outer `vlan` now and then, with a `vlan` after it now and then), over
/// its frames carried in Geneve frames of every layout and then mutated:
/// truncated anywhere, a byte of the outer and Geneve headers changed.
#[test]
fn random_filters_inside_geneve_agree_with_libpcap() {
    let Some(pcap) = libpcap_or_skip() else {
        return;
    };
    let filters: u64 = std::env::var("DPF_GENEVE_FILTERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1500);
    let seed: u64 = std::env::var("DPF_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x6e6e_7e5e);
    let mut g = Gen::new(seed);
    let (mut pairs, mut matched, mut compared, mut refused) = (0u64, 0u64, 0u64, 0u64);
    let mut left_out = 0u64;
    let mut failures = Vec::new();
    for n in 0..filters {
        g.arith = g.rng.random_bool(0.2);
        let inner = g.expr(2);
        let vni = ["", " 12345", " 5"][g.rng.random_range(0..3)];
        let mut filter = match g.rng.random_range(0..8) {
            0 => format!("geneve{vni} and vlan and ({inner})"),
            // Primitives before the `geneve` read the outer frame, and
            // one after it that can run when it did not match is refused.
            1 => format!("({}) and geneve{vni} and ({inner})", g.expr(1)),
            2 => format!("({inner}) or not geneve{vni}"),
            3 => format!("not geneve{vni} or ({inner})"),
            _ => format!("geneve{vni} and ({inner})"),
        };
        if g.rng.random_bool(0.2) {
            filter = format!("vlan and {filter}");
        }
        let ours = compiled(&filter, n % 10 == 0);
        let bpf = match (ours.as_ref(), pcap.compile(&filter)) {
            (Ok(_), Ok(bpf)) => bpf,
            (Err(_), Err(_)) => {
                refused += 1;
                continue;
            }
            // What dpf leaves out after a `geneve` (`mpls`, `pppoes`),
            // and what libpcap reads from unset scratch memory.
            (Err(dpf::Error::Unsupported { feature, .. }), Ok(_))
                if feature.contains("after \"geneve\"") || feature.contains("has not matched") =>
            {
                left_out += 1;
                continue;
            }
            (Err(e), Ok(_)) => panic!("dpf refuses «{filter}», libpcap accepts it: {e}"),
            (Ok(_), Err(e)) => panic!("libpcap refuses «{filter}», dpf accepts it: {e}"),
        };
        let ours = ours.expect("checked");
        compared += 1;
        for _ in 0..60 {
            let (mut o, inner) = random_outer(&mut g, 0.3, &[12345, 5, 7]);
            if filter.starts_with("vlan") || g.rng.random_bool(0.1) {
                o.encap = Encap::Vlan(10);
            }
            let mut pkt = o.frame(&inner, g.rng.random());
            match g.rng.random_range(0..10) {
                0..=2 => {
                    let cut = g.rng.random_range(0..=pkt.len());
                    pkt.truncate(cut);
                }
                3 => {
                    // A byte of the outer headers or the Geneve header.
                    let at = g.rng.random_range(0..pkt.len().min(90));
                    pkt[at] = g.rng.random();
                }
                _ => {}
            }
            let want = bpf.matches(&pkt);
            pairs += 1;
            matched += u64::from(want);
            for (who, got) in dpf_verdicts(&ours, &pkt) {
                if got != want && failures.len() < 10 {
                    failures.push(format!(
                        "«{filter}» on {}: libpcap {want}, dpf {who} {got}\n{}",
                        hex(&pkt),
                        dpf::dump(&ours.program)
                    ));
                }
            }
        }
    }
    eprintln!(
        "{compared} filters, {refused} refused by both, {left_out} left out by dpf, {pairs} pairs, \
         {matched} matching, seed {seed:#x}"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        matched > pairs / 20,
        "too few matches: {matched} of {pairs}"
    );
}

/// Geneve filters and plain ones in one table: for every crafted frame at
/// every length, the owner is the first filter libpcap matches (all at
/// one priority, so the earlier install wins), and the table's XDP
/// program accepts exactly when one matches.
#[test]
fn a_table_of_geneve_and_plain_filters_picks_libpcaps_first_match() {
    let Some(pcap) = libpcap_or_skip() else {
        return;
    };
    let filters: Vec<&str> = FILTERS
        .iter()
        .copied()
        .chain([
            "tcp port 80",
            "udp dst port 6081",
            "ip host 10.0.0.2",
            "ip6",
            "vlan 10",
            "arp",
        ])
        .collect();
    let mut table = new_table();
    let mut bpfs = Vec::new();
    // Plain filters first now and then, so that both kinds win.
    for (owner, f) in filters.iter().enumerate().rev() {
        table.install(f, owner as u32, (owner % 3) as i32).unwrap();
        bpfs.push((owner as u32, (owner % 3) as i32, pcap.compile(f).unwrap()));
    }
    // Highest priority first, then the earlier install.
    bpfs.sort_by_key(|b| std::cmp::Reverse(b.1));
    let mut reader = table.reader();
    let xdp = xdp_usable().then(|| {
        XdpProgram::load(
            table.classifier().merged(),
            &OnAccept::Return(ebpf::xdp::TX),
        )
        .unwrap()
    });
    if let Some(x) = &xdp {
        assert!(x.fallback().is_none(), "{:?}", x.fallback());
    }
    let mut failures = Vec::new();
    let (mut pairs, mut owned) = (0u64, 0u64);
    for frame in crafted() {
        for cut in 0..=frame.len() {
            let pkt = &frame[..cut];
            let want = bpfs.iter().find(|b| b.2.matches(pkt)).map(|b| b.0);
            pairs += 1;
            owned += u64::from(want.is_some());
            let got = [
                ("native", reader.classify(pkt)),
                ("merged", table.classifier().classify_reference(pkt)),
            ];
            for (who, got) in got {
                if got != want && failures.len() < 10 {
                    failures.push(format!(
                        "{}: libpcap's first match {want:?} ({:?}), dpf {who} {got:?}",
                        hex(pkt),
                        want.map(|o| filters[o as usize]),
                    ));
                }
            }
            if let Some(x) = xdp.as_ref().filter(|_| pkt.len() >= 14) {
                let out = x.program().test_run(&ebpf::TestRun::new(pkt)).unwrap();
                if (out.verdict == ebpf::xdp::TX) != want.is_some() && failures.len() < 10 {
                    failures.push(format!(
                        "{}: libpcap {want:?}, eBPF {}",
                        hex(pkt),
                        out.verdict
                    ));
                }
            }
        }
    }
    eprintln!("{pairs} frames, {owned} owned, {} filters", filters.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(owned > pairs / 4, "{owned} of {pairs}");
}

/// The ranks of the merged table's entries whose atoms all hold on
/// `pkt`: the filters whose residuals a frame can reach (the trie walked
/// as [`dpf::merge::Merged::classify`] walks it, without its pruning).
fn reached(m: &Merged, pkt: &[u8]) -> Vec<u32> {
    let mut out = Vec::new();
    let mut todo: Vec<u32> = m.root.into_iter().collect();
    while let Some(id) = todo.pop() {
        let n = &m.nodes[id as usize];
        out.extend(&n.leaves);
        if let Some(d) = &n.dispatch
            && let Some(arm) = d.key.field.load(pkt).and_then(|v| d.find(v & d.key.mask))
        {
            todo.push(arm);
        }
        todo.extend(n.wild);
    }
    out.sort_unstable();
    out
}

/// What `geneve` costs in the merged classifier. Its IPv4 and IPv6
/// alternatives share no test, so `geneve V and ...` has no atom of its
/// own; dpf splits it into the two alternatives (entries of the same
/// owner at adjacent ranks), each with its outer tests, the VNI among
/// them, as atoms, so a table of such filters merges on the VNI as one
/// that writes the outer family (`ip and geneve V and ...`) does: a frame
/// reaches only its own VNI's residual. Prints the native classifier's
/// time per frame for both tables (one measurement, for docs/dpf.md;
/// nothing is asserted of it).
#[test]
fn geneve_filters_merge_on_the_vni_with_or_without_the_outer_family() {
    let analysis = |f: &str| dpf::merge::analyze(&dpf::compile(f).unwrap());
    let vni_atom = |a: &dpf::merge::Analysis, base, offset| {
        let vni = a
            .atoms
            .iter()
            .find(|t| t.key.field.base == base && t.key.field.offset == offset)
            .unwrap_or_else(|| panic!("no VNI atom in {:?}", a.atoms));
        assert_eq!((vni.key.mask, vni.value), (0xffff_ff00, 5 << 8));
        assert!(a.atoms.len() >= 5, "{:?}", a.atoms);
    };
    let bare = analysis("geneve 5 and tcp dst port 80");
    assert!(bare.atoms.is_empty(), "{:?}", bare.atoms);
    let [v4, v6] = bare.alternatives.as_slice() else {
        panic!("not split in two: {:?}", bare.alternatives);
    };
    vni_atom(v4, dpf::ir::Base::Transport, 12);
    vni_atom(v6, dpf::ir::Base::Link, 66);
    let outer = analysis("ip and geneve 5 and tcp dst port 80");
    assert!(outer.alternatives.is_empty(), "{:?}", outer.alternatives);
    vni_atom(&outer, dpf::ir::Base::Transport, 12);
    // Behind `vlan`, a side per TPID and family; in a PPPoE session, per
    // PPP protocol.
    for (f, n) in [
        ("geneve", 2),
        ("vlan and geneve 5", 6),
        ("pppoes and geneve 5 and tcp", 2),
        ("ip6 and geneve 5", 0),
    ] {
        assert_eq!(analysis(f).alternatives.len(), n, "{f}");
    }
    // Filters without a `geneve` are left whole.
    for f in ["tcp dst port 80", "ip or ip6", "vlan and tcp"] {
        assert!(analysis(f).alternatives.is_empty(), "{f}");
    }
    // So is one whose residual is past the split's size: every
    // alternative would carry its share, compiled at every publication.
    let ports = |n: u32| {
        let ports: Vec<String> = (1..=n).map(|i| format!("tcp port {i}")).collect();
        format!("vlan and geneve 5 and ({})", ports.join(" or "))
    };
    let size = |a: &dpf::merge::Analysis| {
        let r = a.residual.as_ref().expect("a residual");
        r.nodes.len() + r.values.len()
    };
    let small = analysis(&ports(4));
    assert_eq!(small.alternatives.len(), 6);
    assert!(size(&small) <= dpf::merge::MAX_SPLIT_RESIDUAL);
    let large = analysis(&ports(100));
    assert!(
        size(&large) > dpf::merge::MAX_SPLIT_RESIDUAL,
        "{}",
        size(&large)
    );
    assert!(large.alternatives.is_empty());
    // A thousand tenants, each its VNI's TCP port 80, and frames of some
    // of them, over IPv4 and IPv6.
    let frame = |vni: u32, v6: bool| {
        let o = if v6 {
            Outer::v6(0x0800)
        } else {
            Outer::v4(0x6558)
        };
        let inner = if v6 {
            tcp4(5)
        } else {
            ether([2; 6], None, 0x0800, &tcp4(5))
        };
        Outer { vni, ..o }.frame(&inner, 0)
    };
    for prefix in ["", "ip and "] {
        let mut table = new_table();
        let filters: Vec<String> = (0..1000)
            .map(|v| format!("{prefix}geneve {v} and tcp dst port 80"))
            .collect();
        let batch: Vec<(&str, u32, i32)> = filters
            .iter()
            .enumerate()
            .map(|(i, f)| (f.as_str(), i as u32, 0))
            .collect();
        table.install_many(batch).unwrap();
        let classifier = table.classifier();
        let merged = classifier.merged();
        assert_eq!(classifier.len(), 1000);
        let mut reader = table.reader();
        for vni in [0, 1, 500, 998, 999] {
            for v6 in [false, true] {
                let pkt = frame(vni, v6);
                let want = (prefix.is_empty() || !v6).then_some(vni);
                assert_eq!(reader.classify(&pkt), want, "«{prefix}» {vni} {v6}");
                assert_eq!(classifier.classify_reference(&pkt), want);
                let owners: Vec<u32> = reached(merged, &pkt)
                    .iter()
                    .map(|&r| merged.entries[r as usize].owner)
                    .collect();
                assert!(
                    owners.iter().all(|&o| o == vni) && owners.len() <= 1,
                    "«{prefix}» VNI {vni} (IPv6 {v6}) reaches the residuals of {owners:?}"
                );
            }
        }
        let stats = merged.stats();
        assert!(stats.nodes > 1000, "{stats:?}");
        assert!(merged.nodes[0].leaves.is_empty(), "filters at the root");
        let pkt = frame(999, false);
        let start = std::time::Instant::now();
        let rounds = 2_000u32;
        for _ in 0..rounds {
            std::hint::black_box(reader.classify(std::hint::black_box(&pkt)));
        }
        eprintln!(
            "1000 × «{prefix}geneve V and tcp dst port 80»: {} trie nodes, {} residuals, {:.0} ns a frame",
            stats.nodes,
            stats.residuals,
            start.elapsed().as_nanos() as f64 / f64::from(rounds),
        );
    }
}

/// Geneve filters of every outer form (bare, `ip and`, `ip6 and`, behind
/// `vlan` and in a `pppoes` session), split into alternatives, among
/// plain filters at several priorities: the owner is libpcap's first
/// match (priority, then install order) on the crafted frames and on
/// random Geneve frames, each cut at every length, and no Geneve filter
/// is left at the trie's root.
#[test]
fn a_table_of_geneve_filters_of_every_outer_form_picks_libpcaps_first_match() {
    let Some(pcap) = libpcap_or_skip() else {
        return;
    };
    let mut filters: Vec<String> = [
        "udp dst port 6081",
        "tcp port 80",
        "ip6",
        "vlan 10",
        "pppoes",
        "arp",
        "geneve and udp port 53",
        "geneve and ether broadcast",
    ]
    .iter()
    .map(|f| f.to_string())
    .collect();
    for vni in [5, 7, 12345] {
        for form in [
            "geneve {}",
            "ip and geneve {} and tcp",
            "ip6 and geneve {}",
            "geneve {} and tcp dst port 80",
            "vlan and geneve {}",
            "vlan 10 and geneve {} and ip",
            "pppoes and geneve {}",
            "pppoes 27 and geneve {} and tcp",
        ] {
            filters.push(form.replace("{}", &vni.to_string()));
        }
    }
    let mut table = new_table();
    let mut bpfs = Vec::new();
    for (owner, f) in filters.iter().enumerate() {
        let priority = if f.contains("geneve") {
            [0, 2, 1][owner % 3]
        } else {
            [-1, 1][owner % 2]
        };
        table.install(f, owner as u32, priority).unwrap();
        bpfs.push((owner as u32, priority, pcap.compile(f).unwrap()));
    }
    // Highest priority first, then the earlier install.
    bpfs.sort_by_key(|b| std::cmp::Reverse(b.1));
    let classifier = table.classifier();
    let merged = classifier.merged();
    assert_eq!(classifier.len(), filters.len());
    assert!(merged.entries.len() > filters.len());
    for &r in &merged.nodes[merged.root.unwrap() as usize].leaves {
        let f = &filters[merged.entries[r as usize].owner as usize];
        assert!(!f.contains("geneve"), "«{f}» at the trie's root");
    }
    let mut reader = table.reader();
    let xdp =
        xdp_usable().then(|| XdpProgram::load(merged, &OnAccept::Return(ebpf::xdp::TX)).unwrap());
    let mut frames = crafted();
    let mut g = Gen::new(0x6765_6e65);
    for _ in 0..300 {
        let (mut o, inner) = random_outer(&mut g, 0.4, &[12345, 5, 7, 6]);
        o.encap = [
            Encap::None,
            Encap::None,
            Encap::Vlan(10),
            Encap::Vlan(11),
            Encap::Pppoes(27),
            Encap::Pppoes(28),
        ][g.rng.random_range(0..6)];
        let mut pkt = o.frame(&inner, g.rng.random());
        if g.rng.random_bool(0.2) {
            let at = g.rng.random_range(0..pkt.len().min(90));
            pkt[at] = g.rng.random();
        }
        frames.push(pkt);
    }
    let mut failures = Vec::new();
    let (mut pairs, mut owned, mut geneve_owned) = (0u64, 0u64, 0u64);
    let mut geneve_owners = std::collections::BTreeSet::new();
    for frame in &frames {
        for cut in 0..=frame.len() {
            let pkt = &frame[..cut];
            let want = bpfs.iter().find(|b| b.2.matches(pkt)).map(|b| b.0);
            pairs += 1;
            owned += u64::from(want.is_some());
            if let Some(o) = want.filter(|&o| filters[o as usize].contains("geneve")) {
                geneve_owned += 1;
                geneve_owners.insert(o);
            }
            let got = [
                ("native", reader.classify(pkt)),
                ("merged", classifier.classify_reference(pkt)),
            ];
            for (who, got) in got {
                if got != want && failures.len() < 10 {
                    failures.push(format!(
                        "{}: libpcap's first match {want:?} ({:?}), dpf {who} {got:?}",
                        hex(pkt),
                        want.map(|o| &filters[o as usize]),
                    ));
                }
            }
            if let Some(x) = xdp.as_ref().filter(|_| pkt.len() >= 14) {
                let out = x.program().test_run(&ebpf::TestRun::new(pkt)).unwrap();
                if (out.verdict == ebpf::xdp::TX) != want.is_some() && failures.len() < 10 {
                    failures.push(format!(
                        "{}: libpcap {want:?}, eBPF {}",
                        hex(pkt),
                        out.verdict
                    ));
                }
            }
        }
    }
    eprintln!(
        "{pairs} frames, {owned} owned ({geneve_owned} by {} geneve filters), {} filters, {} entries",
        geneve_owners.len(),
        filters.len(),
        merged.entries.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(geneve_owned > pairs / 10, "{geneve_owned} of {pairs}");
    assert!(geneve_owners.len() >= 14, "{geneve_owners:?}");
}

/// A `geneve` at the primitive limit compiles and installs on a 256 KiB
/// stack, as every filter does (`tests/limits.rs`): lowering without the
/// optimizer, the gate check and the codegen of its computed values are
/// loops.
#[test]
fn a_geneve_filter_at_the_primitive_limit_installs_on_a_small_stack() {
    // 4,095 primitives: the `geneve` and 4,094 comparisons, the first
    // true of the carried TCP/IPv4 packet.
    let fields: Vec<String> = std::iter::once("ip[0] = 69".to_string())
        .chain((1..4094).map(|i| format!("ip[{}]={}", i % 20, i % 251)))
        .collect();
    let filter = format!("geneve 5 and ({})", fields.join(" or "));
    let start = std::time::Instant::now();
    std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || {
            let mut table = new_table();
            table.install(&filter, 1, 0).unwrap();
            let inner = ether([2; 6], None, 0x0800, &tcp4(5));
            let frame = Outer {
                vni: 5,
                ..Outer::v4(0x6558)
            }
            .frame(&inner, 0);
            assert_eq!(table.reader().classify(&frame), Some(1));
            let too_many = format!("{filter} or ip[1] = 1 or ip[1] = 2");
            assert!(matches!(
                dpf::compile(&too_many),
                Err(dpf::Error::TooManyPrimitives { .. })
            ));
        })
        .unwrap()
        .join()
        .unwrap();
    eprintln!("installed in {:.2?}", start.elapsed());
}
