//! Differential test against libpcap: random filters from dpf's grammar,
//! compiled by `pcap_compile` (DLT_EN10MB, optimized) and by dpf, run on
//! random realistic packets; every verdict of dpf must equal
//! `pcap_offline_filter`'s.
//!
//! `DPF_PAIRS` sets the number of (filter, packet) pairs (default 100,000,
//! the CI size), `DPF_SEED` the seed, `DPF_DEPTH` the nesting depth of
//! the filters (default 2). `DPF_DUMP_WINDOW=1` prints, for each
//! disagreement of the merged table, every filter in it and the merged
//! reference evaluator's verdict. Without libpcap the test skips with
//! a printed reason, unless `DPF_REQUIRE_LIBPCAP=1` (set by
//! `scripts/test.sh`), when it fails.

mod common;

use std::cell::RefCell;
use std::collections::VecDeque;
use std::time::Instant;

use common::{Gen, hex, libpcap_or_skip, new_table};
use dpf::ir::Program;
use dpf::{Reader, Table};
use rand::Rng;

/// The bytes of an IPv6 address written as text.
fn v6(text: &str) -> [u8; 16] {
    text.parse::<std::net::Ipv6Addr>()
        .expect("an IPv6 address")
        .octets()
}

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

/// One filter as dpf compiles it, with everything that gives a verdict:
/// the lowered program, and a one-filter table (its merged structure and
/// native classifier, published in a code cache the tests share).
struct Compiled {
    filter: String,
    program: Program,
    table: Table,
    reader: RefCell<Reader>,
}

fn dpf_compile(filter: &str) -> Result<Compiled, dpf::Error> {
    let program = dpf::compile(filter)?;
    let mut table = new_table();
    table.install(filter, 1, 0)?;
    let reader = RefCell::new(table.reader());
    Ok(Compiled {
        filter: filter.to_string(),
        program,
        table,
        reader,
    })
}

/// Every verdict dpf gives for one (filter, packet) pair, by name.
fn dpf_verdicts(c: &Compiled, pkt: &[u8]) -> Vec<(&'static str, bool)> {
    dpf_verdicts_captured(c, pkt, pkt.len() as u32)
}

/// [`dpf_verdicts`] for `pkt` the captured bytes of a packet of `wire`
/// bytes on the wire.
fn dpf_verdicts_captured(c: &Compiled, pkt: &[u8], wire: u32) -> Vec<(&'static str, bool)> {
    let whole = wire as usize == pkt.len();
    let mut v = vec![
        ("reference", c.program.matches_captured(pkt, wire)),
        (
            "merged",
            c.table.classifier().classify_reference_captured(pkt, wire) == Some(1),
        ),
        (
            "native",
            c.reader.borrow_mut().classify_captured(pkt, wire) == Some(1),
        ),
    ];
    if whole {
        v.push((
            "native (whole frame)",
            c.reader.borrow_mut().classify(pkt) == Some(1),
        ));
    }
    v
}

/// The last few filters, merged in one table, against libpcap running the
/// same filters in turn: the table must return the first that matches.
struct Window<'p> {
    table: Table,
    reader: Reader,
    filters: VecDeque<(dpf::FilterId, u32, Option<dpf::pcap::Bpf<'p>>, String)>,
    next_owner: u32,
}

impl<'p> Window<'p> {
    const SIZE: usize = 24;

    fn new() -> Self {
        let table = new_table();
        let reader = table.reader();
        Window {
            table,
            reader,
            filters: VecDeque::new(),
            next_owner: 0,
        }
    }

    fn push(&mut self, filter: &str, bpf: Option<dpf::pcap::Bpf<'p>>) {
        if self.filters.len() == Self::SIZE {
            let (id, ..) = self.filters.pop_front().expect("full");
            self.table.remove(id).expect("installed");
        }
        let owner = self.next_owner;
        self.next_owner += 1;
        let id = self
            .table
            .install(filter, owner, 0)
            .expect("compiles alone");
        self.filters.push_back((id, owner, bpf, filter.to_string()));
    }

    /// The text of the filter of `owner`, if still in the window.
    fn text(&self, owner: Option<u32>) -> &str {
        self.filters
            .iter()
            .find(|f| Some(f.1) == owner)
            .map_or("", |f| f.3.as_str())
    }

    /// (libpcap's first match, dpf's), as owners, for `pkt` the captured
    /// bytes of a packet of `wire` bytes on the wire.
    fn verdicts(&mut self, pkt: &[u8], wire: u32) -> (Option<u32>, Option<u32>) {
        let want = self
            .filters
            .iter()
            .find(|f| f.2.as_ref().is_some_and(|b| b.matches_captured(pkt, wire)))
            .map(|f| f.1);
        (want, self.reader.classify_captured(pkt, wire))
    }
}

/// The first instruction of a libpcap program that reads the X register,
/// or a scratch slot `M[k]`, on a path where nothing has set it.
/// libpcap's code generator always sets them before an operation uses
/// them, but its optimizer sometimes deletes the store or load (`not (!
/// (! len < 40 or 0 | len <= 36 or ip[10] & (ip[24] / len & ether[30:1])
/// <= 62) && len > 42)` divides by an X that should hold `len`; `... 36 <
/// arp[18:4] % ether[19:1]` takes a modulus by an X never loaded;
/// `... len - ether[2:4] > len - ip6[25:1] / len` reads the second `len`
/// from an `M[0]` whose store it deleted, seed 100): the interpreter's
/// register is then 0, and the verdicts are not the filter's. Jumps only
/// go forward, so one pass in order finds every path.
fn reads_unset_register(insns: &[dpf::pcap::BpfInsn]) -> Option<usize> {
    // Bit k is M[k], bit 16 is X.
    const X: u32 = 1 << 16;
    // Per instruction: reached at all, and the registers possibly unset
    // on some path to it.
    let mut reached = vec![false; insns.len() + 1];
    let mut unset = vec![0u32; insns.len() + 1];
    reached[0] = true;
    unset[0] = X | 0xffff;
    for (i, ins) in insns.iter().enumerate() {
        if !reached[i] {
            continue;
        }
        let (class, src_x) = (ins.code & 0x07, ins.code & 0x08 != 0);
        let slot = 1u32 << (ins.k & 0xf);
        let mem = ins.code & 0xe0 == 0x60;
        let reads = match class {
            0x00 if ins.code & 0xe0 == 0x40 => X, // ld [x + k]
            0x00 | 0x01 if mem => slot,           // ld M[k], ldx M[k]
            0x00..=0x02 => 0,
            0x03 => X,                                     // stx
            0x04 | 0x05 if src_x && ins.code != 0x05 => X, // alu/jmp on x (not ja)
            0x04 | 0x05 => 0,
            0x06 if ins.code & 0x18 == 0x08 => X, // ret x
            0x06 => 0,
            _ if ins.code == 0x87 => X, // txa
            _ => 0,
        };
        if reads & unset[i] != 0 {
            return Some(i);
        }
        let writes = match class {
            0x01 => X,                  // ldx
            0x02 | 0x03 => slot,        // st, stx
            _ if ins.code == 0x07 => X, // tax
            _ => 0,
        };
        let out = unset[i] & !writes;
        let mut flow = |t: usize| {
            if t < reached.len() {
                reached[t] = true;
                unset[t] |= out;
            }
        };
        match class {
            0x05 if ins.code == 0x05 => flow(i + 1 + ins.k as usize),
            0x05 => {
                flow(i + 1 + ins.jt as usize);
                flow(i + 1 + ins.jf as usize);
            }
            0x06 => {}
            _ => flow(i + 1),
        }
    }
    None
}

/// The bytes `text` spells in hex.
fn hex_bytes(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect()
}

/// Whether libpcap 1.10.3's optimizer miscompiles `filter` by the
/// repeated IPv6 prefix (docs/dpf.md, "libpcap behaviour the test steers
/// around"): one IPv6 network named twice whose prefix leaves a word of
/// zero under a partial mask. The second test is decided as if the first
/// had had the opposite outcome (`src net 2001:db8::/48 and not src net
/// 2001:db8::/48` accepts 2001:db8::1); likely because that word's `and
/// #m; jeq #0` becomes `jset #m`, its edges swapped, in the optimizer's
/// first round after the round's edge dominators were found. Directions
/// are not told apart, so a few filters libpcap gets right are left out
/// too.
fn repeats_a_masked_ipv6_prefix(filter: &str) -> bool {
    use dpf::syntax::{Expr, Primitive};
    fn walk(e: &Expr, seen: &mut Vec<([u8; 16], u8)>) -> bool {
        match e {
            Expr::And(a, b) | Expr::Or(a, b) => walk(a, seen) || walk(b, seen),
            Expr::Not(a) => walk(a, seen),
            Expr::Prim(p) => {
                let p = match p {
                    Primitive::Shifted { inner, .. } => &**inner,
                    p => p,
                };
                let &Primitive::Net6 { addr, len, .. } = p else {
                    return false;
                };
                let mask = dpf::syntax::mask6(len);
                let bits = u128::from_be_bytes(addr);
                let jset_word = (0..4).any(|w| {
                    let m = (mask >> (96 - 32 * w)) as u32;
                    let a = (bits >> (96 - 32 * w)) as u32;
                    m != 0 && m != u32::MAX && a == 0
                });
                if !jset_word {
                    return false;
                }
                if seen.contains(&(addr, len)) {
                    return true;
                }
                seen.push((addr, len));
                false
            }
        }
    }
    dpf::parse(filter).is_ok_and(|e| walk(&e, &mut Vec::new()))
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
    let mut libpcap_miscompiled = 0u64;
    let mut repeated_prefix = 0u64;
    let mut failures = Vec::new();
    let mut window = Window::new();
    let mut window_matched = 0u64;
    while done < pairs {
        // A third of the filters with arithmetic, `len`, `less` and
        // `greater` (and nothing behind the IPv4 header).
        g.arith = g.rng.random_bool(1.0 / 3.0);
        let mut filter = g.expr(depth);
        // A fifth behind `vlan`, which moves every later primitive's
        // link-layer type and payload four bytes on.
        // A tenth behind one or two `mpls` labels, which move the payload
        // (and tell IPv4 from IPv6 by the version, refusing any other
        // protocol: both sides refuse those filters).
        if g.rng.random_bool(0.1) {
            for _ in 0..g.rng.random_range(1..=2) {
                let label = ["", " 100", " 200", " 5"][g.rng.random_range(0..4)];
                let op = ["and", "or", "and not"][g.rng.random_range(0..3)];
                filter = format!("mpls{label} {op} ({filter})");
            }
        }
        // A tenth in the PPP frame of a PPPoE session (which moves every
        // later primitive's type and payload on, and reads the type as a
        // PPP protocol), where dpf takes what follows: it refuses what
        // libpcap refuses there and what it leaves out (`ether[...]`,
        // ISO), so those filters stay unwrapped.
        if g.rng.random_bool(0.1) {
            let id = ["", " 1234", " 27"][g.rng.random_range(0..3)];
            let op = ["and", "or", "and not"][g.rng.random_range(0..3)];
            let wrapped = format!("pppoes{id} {op} ({filter})");
            if dpf::parse(&wrapped).is_ok() {
                filter = wrapped;
            }
        }
        if g.rng.random_bool(0.2) {
            let id = ["", " 100", " 1", " 0"][g.rng.random_range(0..4)];
            let op = ["and", "or", "and not"][g.rng.random_range(0..3)];
            filter = format!("vlan{id} {op} ({filter})");
        }
        let ours = dpf_compile(&filter);
        let theirs = pcap.compile(&filter);
        if ours.is_ok() && repeats_a_masked_ipv6_prefix(&filter) {
            repeated_prefix += 1;
            continue;
        }
        let bpf = match (&ours, theirs) {
            // libpcap's optimizer sometimes deletes the load of X or the
            // store of a scratch slot an operation needs (see
            // `reads_unset_register`): its verdicts are then not the
            // filter's meaning, so the pair is not compared.
            (Ok(_), Ok(bpf)) if reads_unset_register(bpf.insns()).is_some() => {
                libpcap_miscompiled += 1;
                continue;
            }
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
        let pcap_again = pcap.compile(&filter).ok();
        window.push(&filter, pcap_again);
        for _ in 0..PACKETS_PER_FILTER {
            let pkt = g.packet();
            // A quarter read as a capture's record cut to its snaplen from
            // a longer packet: `len` is the wire's length, the loads see
            // only the bytes (libpcap's `caplen` and `len`).
            let wire = if g.rng.random_bool(0.25) {
                pkt.len() as u32 + g.rng.random_range(1..1500)
            } else {
                pkt.len() as u32
            };
            let (first, ours_first) = window.verdicts(&pkt, wire);
            window_matched += u64::from(first.is_some());
            if first != ours_first && failures.len() < 10 {
                failures.push(format!(
                    "a table of the last {} filters: libpcap in turn says owner {first:?}, dpf {ours_first:?}\n  packet ({wire} bytes on the wire) {}\n  libpcap's {:?}\n  dpf's {:?}",
                    window.filters.len(),
                    hex(&pkt),
                    window.text(first),
                    window.text(ours_first),
                ));
                if std::env::var_os("DPF_DUMP_WINDOW").is_some() {
                    eprintln!(
                        "window (owner, filter), merged reference says {:?}:",
                        window
                            .table
                            .classifier()
                            .classify_reference_captured(&pkt, wire)
                    );
                    for f in &window.filters {
                        eprintln!("  {} {:?}", f.1, f.3);
                    }
                }
            }
            let want = bpf.as_ref().is_some_and(|b| b.matches_captured(&pkt, wire));
            matched += u64::from(want);
            done += 1;
            for (who, got) in dpf_verdicts_captured(&ours, &pkt, wire) {
                if got != want && failures.len() < 10 {
                    failures.push(format!(
                        "filter {:?}\n  parsed {}\n  packet ({} bytes of {wire}) {}\n  libpcap {want}, dpf {who} {got}\n  dpf program:\n{}  libpcap program:\n{}",
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
        "libpcap {}: {done} pairs over {filters} filters ({rejected_all} rejecting all, {libpcap_miscompiled} skipped as miscompiled by libpcap, {repeated_prefix} as repeating a masked IPv6 prefix), {:.1}% matching, seed {seed:#x}, {:.2?}; \
         tables of the last {} filters: {:.1}% of packets matched one",
        pcap.version(),
        100.0 * fraction,
        start.elapsed(),
        Window::SIZE,
        100.0 * window_matched as f64 / done as f64,
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
/// options, of an IPv6 fragment, of an ARP request, of IS-IS and the rest
/// below.
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
    frag6[22..38].copy_from_slice(&v6("2001:db8::1"));
    frag6[38..54].copy_from_slice(&v6("fe80::1"));
    frag6[54] = 6;
    frag6[62..64].copy_from_slice(&80u16.to_be_bytes());
    let mut arp = vec![0u8; 14 + 28];
    arp[12] = 0x08;
    arp[13] = 0x06;
    arp[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    arp[28..32].copy_from_slice(&[192, 168, 1, 1]);
    arp[38..42].copy_from_slice(&[10, 0, 0, 1]);
    // VRRP over IPv4 with options, from 00:11:22:33:44:55 to broadcast.
    let mut vrrp = vec![0u8; 14 + 24 + 0xb0];
    vrrp[..6].fill(0xff);
    vrrp[6..12].copy_from_slice(&[0x00, 0x11, 0x22, 0x33, 0x44, 0x55]);
    vrrp[12] = 0x08;
    vrrp[14] = 0x46;
    vrrp[23] = 112;
    vrrp[38..40].copy_from_slice(&[0x21, 0x01]);
    vrrp[38 + 0xab] = 0xcd;
    // An ICMPv6 echo request (type 128), a byte 0xcd at 0xab into it;
    // the same behind two stacked VLAN tags (802.1ad 100, then 802.1Q 5);
    // an 802.3 frame with the ISO SAPs.
    let mut icmp6 = vec![0u8; 14 + 40 + 0xb0];
    icmp6[12] = 0x86;
    icmp6[13] = 0xdd;
    icmp6[20] = 58;
    icmp6[54] = 128;
    icmp6[54 + 0xab] = 0xcd;
    let mut tagged_tcp = tcp4.clone();
    tagged_tcp.splice(12..12, [0x81, 0x00, 0x00, 100]);
    let mut tagged = icmp6.clone();
    tagged.splice(12..12, [0x88, 0xa8, 0x00, 100, 0x81, 0x00, 0x00, 5]);
    // A PPPoE session frame, session 1234.
    let mut pppoe = vec![0u8; 14 + 8];
    pppoe[12..14].copy_from_slice(&0x8864u16.to_be_bytes());
    pppoe[14..18].copy_from_slice(&[0x11, 0x00, 0x04, 0xd2]);
    // The TCP/IPv4 frame in a PPPoE session (1234, PPP protocol 0x21),
    // the ICMPv6 one in one behind an 802.1Q tag (VLAN 5, PPP 0x57), and
    // the TCP one below an MPLS label (123) in a session (PPP 0x0281).
    let in_session = |frame: &[u8], ppp: [u8; 2], tagged: bool| {
        let mut f = frame[..12].to_vec();
        if tagged {
            f.extend([0x81, 0x00, 0x00, 5]);
        }
        f.extend([0x88, 0x64, 0x11, 0x00, 0x04, 0xd2]);
        let payload = &frame[14..];
        f.extend(((payload.len() + 2) as u16).to_be_bytes());
        f.extend(ppp);
        f.extend(payload);
        f
    };
    let pppoe_tcp = in_session(&tcp4, [0x00, 0x21], false);
    let mut labelled_in_session = tcp4.clone();
    labelled_in_session.splice(14..14, [0x00, 0x07, 0xb1, 64]);
    let pppoe_mpls = in_session(&labelled_in_session, [0x02, 0x81], false);
    let mut llc = vec![0u8; 14 + 3];
    llc[12..14].copy_from_slice(&3u16.to_be_bytes());
    llc[14..17].copy_from_slice(&[0xfe, 0xfe, 0x03]);
    // The same behind an 802.1Q tag (VLAN 5), an RNR with the poll bit
    // set (an S frame), and Netware's raw 802.3 (DSAP and SSAP 0xff).
    let mut tagged_llc = llc.clone();
    tagged_llc.splice(12..12, [0x81, 0x00, 0x00, 5]);
    tagged_llc[20] = 0x15;
    let mut netware = llc.clone();
    netware[14..16].copy_from_slice(&[0xff, 0xff]);
    // IS-IS in 802.3 (the ISO SAPs, protocol id 0x83): a level-1 LSP
    // (PDU type 18), the same behind a tag, and a CLNP packet (0x81).
    let mut isis = vec![0u8; 14 + 3 + 8];
    isis[12..14].copy_from_slice(&11u16.to_be_bytes());
    isis[14..18].copy_from_slice(&[0xfe, 0xfe, 0x03, 0x83]);
    isis[21] = 18;
    let mut tagged_isis = isis.clone();
    tagged_isis.splice(12..12, [0x81, 0x00, 0x00, 5]);
    let mut clnp = isis.clone();
    clnp[17] = 0x81;
    // AppleTalk in 802.2 SNAP (Apple's OUI), IPX in SNAP (the zero OUI).
    let mut atalk = vec![0u8; 14 + 8 + 4];
    atalk[12..14].copy_from_slice(&12u16.to_be_bytes());
    atalk[14..22].copy_from_slice(&[0xaa, 0xaa, 0x03, 0x08, 0x00, 0x07, 0x80, 0x9b]);
    let mut ipx = atalk.clone();
    ipx[17..22].copy_from_slice(&[0, 0, 0, 0x81, 0x37]);
    // The TCP/IPv4 frame below two MPLS labels, 100 and then 200 (the
    // bottom of the stack), and the ICMPv6 one below label 5 behind a tag.
    let mut labelled = tcp4.clone();
    labelled[12..14].copy_from_slice(&0x8847u16.to_be_bytes());
    labelled.splice(14..14, [0x00, 0x06, 0x40, 64, 0x00, 0x0c, 0x81, 64]);
    let pppoe_icmp6 = in_session(&icmp6, [0x00, 0x57], true);
    let mut labelled6 = icmp6.clone();
    labelled6.splice(
        12..14,
        [0x81, 0x00, 0x00, 5, 0x88, 0x47, 0x00, 0x00, 0x51, 64],
    );
    // DECnet: a short routing header (flags 2) from 1.2 to 50.764, and a
    // long one (flags 6) behind a pad byte and an 802.1Q tag, from 63.1023
    // to 50.764; the nodes little-endian.
    let node = |area: u16, node: u16| (area << 10 | node).to_le_bytes();
    let mut decnet = vec![0u8; 14 + 2 + 6];
    decnet[12..14].copy_from_slice(&0x6003u16.to_be_bytes());
    decnet[16] = 0x02;
    decnet[17..19].copy_from_slice(&node(50, 764));
    decnet[19..21].copy_from_slice(&node(1, 2));
    let mut decnet_long = vec![0u8; 14 + 3 + 21];
    decnet_long[12..14].copy_from_slice(&0x6003u16.to_be_bytes());
    decnet_long[16..18].copy_from_slice(&[0x81, 0x0e]);
    decnet_long[24..26].copy_from_slice(&node(50, 764));
    decnet_long[32..34].copy_from_slice(&node(63, 1023));
    decnet_long.splice(12..12, [0x81, 0x00, 0x00, 5]);
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
        "vrrp[0] = 0x21",
        "carp[0:2] & 0xff = 1",
        "vrrp[0xab] == 0xcd",
        "icmp6[0] = 128",
        "icmp6[0xab] = 0xcd",
        "vlan",
        "vlan 100",
        "vlan 100 and vlan 5",
        "vlan and not vlan 6",
        "ether src 00:11:22:33:44:55",
        "ether dst host 0011.2233.4455 or ether src 0-11-22-33-44-55",
        "ether host ff:ff:ff:ff:ff:ff",
        "ether proto \\iso or netbeui",
        "igmp or vrrp or decnet",
        // Arithmetic, `len` and named values, including behind the IPv4
        // header (which the random test leaves out).
        "tcp[tcpflags] & (tcp-syn|tcp-ack) != 0",
        "tcp[tcpflags] & tcp-syn != 0 and tcp[tcpflags] & tcp-ack = 0",
        "tcp[((tcp[12] & 0xf0) >> 2):4] = 0",
        "ip[2:2] - ((ip[0] & 0xf) << 2) - ((tcp[12] & 0xf0) >> 2) != 0",
        "icmp[icmptype] = icmp-echo or icmp6[icmp6type] = icmp6-echo",
        "len >= 60 and less 100",
        "greater 58 or ether[len - 1] = 0",
        "ip[ip[0] & 0xf] > 0 or ip6[len % 7:2] = 0",
        "ether[12:2] - 0x800 = tcp[0] / 256",
        "not ip[1] * 2 + ip[2] % 3 - (ip[3] ^ 5) >= 9 << 1",
        "vlan and ip",
        "vlan 100 and tcp port 80",
        "vlan and tcp[13] & 0x12 = 0x12 and ip[0] & 0xf > 5",
        "vlan or ether src 00:11:22:33:44:55 or ether[12:2] = 0x8100",
        "vlan 100 and vlan 5 and icmp6 and icmp6[0] = 128",
        "vlan and not host 10.0.0.1 and len > 60",
        "vlan and tcp[tcpflags] & tcp-syn != 0 and ip[2:2] - ((ip[0] & 0xf) << 2) > 20",
        "not vlan or ip6 or arp",
        "pppoed or pppoes 1234",
        "pppoes",
        "not pppoes 0",
        "llc",
        "llc u or llc ui",
        "not llc i and not llc s",
        "vlan 5 and llc rnr",
        "vlan and (llc s or llc)",
        "llc rr or llc xid or ether[16] = 0x15",
        // ISO and IS-IS: the SAPs, the protocol id, the PDU type.
        "isis",
        "clnp or es-is",
        "l1",
        "l2 or iih",
        "lsp and not snp",
        "csnp or psnp or isis proto 18",
        "iso proto 0x83 or 0x81",
        "not iso proto \\clnp and iso",
        "vlan 5 and l1",
        "vlan and (isis proto 20 or clnp)",
        // AppleTalk, AARP and IPX: the EtherType or their 802.3 forms.
        "atalk",
        "aarp or ipx",
        "ether proto \\ipx and not ether proto \\atalk",
        "vlan 5 and (atalk or ipx)",
        // Primitives in a PPPoE session's PPP frame.
        "pppoes and ip",
        "pppoes 1234 and tcp port 80",
        "pppoes and host 10.0.0.1 and tcp[13] & 0x12 = 0x12",
        "vlan and pppoes and (ip6 or arp) and icmp6[0] = 128",
        "vlan 5 and pppoes and icmp6",
        "pppoes and mpls 123 and tcp dst port 80",
        "pppoes and ip[2:2] - ((ip[0] & 0xf) << 2) > 20",
        "pppoes or ip",
        "not pppoes and tcp",
        // DECnet: each layout, each direction, behind a tag.
        "decnet host 50.764",
        "decnet src 1.2 or 63.1023",
        "decnet dst host 50.764 and not decnet src 1.2",
        "decnet src and dst host 50.764",
        "vlan 5 and decnet src host 63.1023",
        "vlan and decnet dst 50.764",
        // IPv6 addresses: every word of both, a prefix inside a word,
        // the whole space (no load but the type's), behind two tags.
        "host 2001:db8::1",
        "ip6 src net 2001:db8::/32 and dst host fe80::1",
        "src and dst net 2001:db8::/31 or fe80::/10",
        "dst net fe80::/10 and not src host 2001:db8::2",
        "net ::/0 or host ::1",
        "net 2001:db8::/127",
        "vlan 100 and vlan 5 and host ::",
        "vlan and ip6 net ::/0",
        // MPLS: the EtherType and labels, the stack's bottom bit, the IP
        // version below it, the payload moved, what labels do not move
        // (the MAC addresses, `ether[...]`, `llc`).
        "mpls",
        "mpls 100",
        "mpls 100 and mpls 200 and tcp port 80",
        "mpls and mpls 200 and host 10.0.0.1",
        "mpls 100 and not ip6 and tcp[13] & 0x12 = 0x12",
        "mpls or ip",
        "mpls and icmp6[0] = 128 or mpls and ip[0] & 0xf > 5",
        "vlan 5 and mpls 5 and icmp6",
        "mpls and (llc or ether src 00:11:22:33:44:55 or ether[14:2] = 6)",
        // Regressions: each of these once disagreed with libpcap.
        "not (host 192.168.1.1 and 10.0.0.1)",
        // `e & 0xffffffff != 0`: libpcap's `jset #0xffffffff` always
        // holds, so the whole filter is `ret #65535`.
        "(ether[24:4] * 17 & 0xffffffff != icmpcode & 26 - 6) or rarp host 192.168.1.1",
        "ip[2:2] + 1 & 0xffffffff = 0 and tcp",
        "not ip[0:2] & 0 == 39498",
        "ether[1] & 0xffffffff != 0 or ether[100] = 1",
        "((arp && sctp) or not ether[129:2] & 0x12 > 0xffff) && icmp[13:2] & 0xff >= 56616 or ip",
        "(ether[56:4] < 5 and ether proto 0x800) or not (not net 0.0.0.0/0 and tcp[3] < 80)",
    ];
    let mut n = 0;
    for f in filters {
        let ours = dpf_compile(f).unwrap_or_else(|e| panic!("{f}: {e}"));
        let bpf = pcap.compile(f).unwrap_or_else(|e| panic!("{f}: {e}"));
        for frame in [
            &tcp4,
            &frag6,
            &arp,
            &vrrp,
            &icmp6,
            &tagged,
            &tagged_tcp,
            &llc,
            &tagged_llc,
            &netware,
            &isis,
            &tagged_isis,
            &clnp,
            &atalk,
            &ipx,
            &pppoe,
            &labelled,
            &labelled6,
            &decnet,
            &decnet_long,
            &pppoe_tcp,
            &pppoe_icmp6,
            &pppoe_mpls,
        ] {
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

/// libpcap's optimizer deletes a load of X an arithmetic operation needs;
/// the random test recognises such programs and does not compare them,
/// and dpf keeps the filter's meaning.
#[test]
fn libpcap_programs_reading_an_unset_register_are_recognised() {
    let Some(pcap) = libpcap_or_skip() else {
        return;
    };
    // 39 bytes of IPv4: len < 40 fails, ip[10] is 0, so the parenthesis
    // holds, its negation fails and the whole filter matches.
    let pkt =
        hex_bytes("779a4fb17253622419d9979e0800454d002a00003c3740700000ac100504ac100504a5f3a28deb");
    let divides = "not (! (! len < 40 or 0 | len <= 36 or ip[10] & (ip[24] / len & ether[30:1]) <= 62) && len > 42)";
    let bpf = pcap.compile(divides).expect("libpcap compiles it");
    assert!(
        reads_unset_register(bpf.insns()).is_some(),
        "{}",
        bpf.image()
    );
    assert!(!bpf.matches(&pkt), "libpcap divides by X = 0 and rejects");
    assert!(
        dpf::compile(divides)
            .expect("dpf compiles it")
            .matches(&pkt)
    );
    let modulus = "tcp-syn >> 9 | ip[5] != 57 and 36 < arp[18:4] % ether[19:1]";
    let bpf = pcap.compile(modulus).expect("libpcap compiles it");
    assert!(
        reads_unset_register(bpf.insns()).is_some(),
        "{}",
        bpf.image()
    );
    // The second `len` of the last comparison read from an `M[0]` whose
    // store libpcap deleted, as 0: a 42-byte UDP/IPv4 frame matches the
    // filter (42 - 0x3e002f > 42 - 0 / 42, unsigned) but not libpcap's
    // program (42 - 0x3e002f > 0 - 0 / 42 fails).
    let slot = "! len < 31 and ((len & len <= 59 || greater 100 and ! icmp6[24:4] ^ (22) & \
                (arp[9:1] << 22 >> 27) < ip6[ip[19:4] + 24:1]) and (src or dst net 10.0.0.0/24 \
                and len - ether[2:4] > len - ip6[25:1] / len))";
    let pkt = hex_bytes(
        "ffffffffffff61ac9f263a110800453e002f00000000401100000a000002ac1005041f900050c705fa8b",
    );
    let bpf = pcap.compile(slot).expect("libpcap compiles it");
    assert!(
        reads_unset_register(bpf.insns()).is_some(),
        "{}",
        bpf.image()
    );
    assert!(!bpf.matches(&pkt), "libpcap reads M[0] as 0 and rejects");
    assert!(dpf::compile(slot).expect("dpf compiles it").matches(&pkt));
    // Programs libpcap compiles correctly load X before every use.
    for ok in [
        "tcp port 80",
        "ip[24] / len > 3",
        "arp[18:4] % ether[19:1] > 36",
        "udp and ip[2:2] - ((ip[0] & 0xf) << 2) > 40",
    ] {
        let bpf = pcap.compile(ok).expect("libpcap compiles it");
        assert_eq!(
            reads_unset_register(bpf.insns()),
            None,
            "{ok}\n{}",
            bpf.image()
        );
    }
}

/// A zero divisor libpcap only finds after the accumulator's zero: in
/// `0 % (e * 0)` its optimizer turns `e * 0` into the constant 0 a pass
/// after making the modulus of a known-zero accumulator the constant 0, so
/// it accepts the filter; with a left operand it does not know, or a
/// divisor it knows at once, it refuses "modulus by zero", if the block is
/// still reachable when it does. dpf accepts and refuses exactly the same
/// filters.
#[test]
fn a_zero_divisor_is_refused_exactly_when_libpcap_refuses_it() {
    let Some(pcap) = libpcap_or_skip() else {
        return;
    };
    let cases = [
        (
            "not icmp6type % ip6[28:1] * icmptype <= ip[ether[24]] or not ether src and dst host 33:33:00:00:00:01",
            true,
        ),
        ("icmp6type % ip6[28:1] * icmptype <= 3", true),
        ("0 / (ip[1] & 0) = 0", true),
        ("0 % 0 = 0", false),
        ("ip[1] % ip[2] * 0 > 1", false),
        ("5 % (ip[1] * 0) > 1", false),
        ("0 % (2 - 2) = 0", false),
        // A zero divisor beside a dividend libpcap does not know is made
        // an immediate first and refused the next time its block is
        // visited: by then `0 > -5`, decided in the second pass's first
        // round, has cut it off. With the dividend known it is refused at
        // once, and with `0 < -5` it is still reachable. Found by the
        // random test at depth 3 (seed 5).
        ("(0 > -5 and len / (38 >> 11 * 0x45) != 33) or ip", true),
        ("(0 > -5 and len % (38 >> 11 * 0x45) != 33) or ip", true),
        ("(0 > -5 and 7 / (38 >> 11 * 0x45) != 33) or ip", false),
        ("(0 < -5 and len / (38 >> 11 * 0x45) != 33) or ip", false),
        ("(0 > 5 and len / (38 >> 11 * 0x45) != 33) or ip", true),
        // `ether[30:4] & 0` is constant only a round into the second pass
        // (`and x` becomes `and #0` first): the same round the modulus is
        // refused in, so it cuts nothing off in time (depth 5, seed 2).
        (
            "(not ether[30:4] & 0x0 <= 0x0 and len % (23 >> 23) = 23) or ip",
            false,
        ),
        ("(ip[1] * 0 > 0 and len % (23 >> 23) = 23) or ip", true),
    ];
    for (filter, accepted) in cases {
        let theirs = pcap.compile(filter);
        assert_eq!(
            theirs.is_ok(),
            accepted,
            "libpcap on {filter}: {}",
            theirs.err().map(|e| e.to_string()).unwrap_or_default()
        );
        let ours = dpf::compile(filter);
        assert_eq!(
            ours.is_ok(),
            accepted,
            "dpf on {filter}: {}",
            ours.err().map(|e| e.to_string()).unwrap_or_default()
        );
    }
}

/// libpcap refuses a zero divisor when its second pass visits the
/// statement with the divisor known, but its dead-store removal takes a
/// statement away once nothing reads it, one statement a round back from
/// a consumer that folded. A refused statement dead before its round is
/// never refused: in `0 / (e % (f & 0))` the division is the constant 0
/// in the pass's first round, the `tax` feeding it dies in that round and
/// the modulus in the next, the round it is made `mod #0`, a round before
/// it would be refused. One statement more between them (a negation, an
/// immediate operand, a scratch slot) or a later fold, and it is refused.
/// Depth 6, seed 28 of the random test found the first; the rest are
/// its neighbours, each checked against libpcap's rounds.
#[test]
fn a_refusal_whose_statement_dies_first_is_never_made() {
    let Some(pcap) = libpcap_or_skip() else {
        return;
    };
    let refused = |reason: &'static str| Some(reason);
    let modulus = refused("modulus by zero");
    let shift = refused("shift by more than 31 bits");
    let cases = [
        (
            "src or dst net ::ffff:0:0/96 and not -24 ^ ether[11] >= -12 + icmp6type / \
             (arp[21] % ip[16:4] & icmptype)",
            None,
        ),
        // The modulus is the division's right operand: dead in round 1,
        // the round before the one that would refuse it.
        ("ip and 0 / (ip[21] % (ip[16:4] & 0)) != ip[2]", None),
        ("ip and 0 * (ip[21] % (ip[16:4] & 0)) != ip[2]", None),
        ("ip and ip[2] + 0 / (ip[21] % (ip[16:4] & 0)) > 3", None),
        // A zero the left operand holds only from round 1 folds a round
        // later: the modulus is refused in round 2 before it dies there.
        (
            "ip and (ip[3] & 0) / (ip[21] % (ip[16:4] & 0)) != ip[2]",
            modulus,
        ),
        // The left operand of `e * 0` reaches it in A: it dies the round
        // `mul #0` becomes `ld #0`, round 1.
        ("ip and (ip[21] % (ip[16:4] & 0)) * 0 != ip[7]", None),
        // Statements between: `add x` and the `tax` before it, a
        // negation, an immediate `mul #3`.
        ("ip and 0 / (1 + ip[21] % (ip[16:4] & 0)) != ip[2]", modulus),
        ("ip and 0 / -(ip[21] % (ip[16:4] & 0)) != ip[2]", modulus),
        (
            "ip and 0 / ((ip[21] % (ip[16:4] & 0)) * 3) != ip[2]",
            modulus,
        ),
        ("ip and 0 / ip[ip[21] % (ip[16:4] & 0)] != ip[2]", modulus),
        // A divisor known a round later (`ip[3] & (f & 0)`, round 2)
        // gives the chain a round more.
        (
            "ip and 0 / -(ip[21] % (ip[3] & (ip[16:4] & 0))) != ip[2]",
            None,
        ),
        (
            "ip and 0 / ((ip[21] % (ip[3] & (ip[16:4] & 0))) * 3) != ip[2]",
            None,
        ),
        (
            "ip and (ip[3] & 0) / (ip[21] % (ip[3] & (ip[16:4] & 0))) != ip[2]",
            None,
        ),
        (
            "ip and (ip[3] & 0) / -(ip[21] % (ip[3] & (ip[16:4] & 0))) != ip[2]",
            modulus,
        ),
        (
            "ip and 0 / (ip[5] + (ip[21] % (ip[3] & (ip[16:4] & 0)))) != ip[2]",
            modulus,
        ),
        (
            "ip and 0 / ((ip[21] % (ip[3] & (ip[16:4] & 0))) + ip[5]) != ip[2]",
            modulus,
        ),
        // A literal zero divisor is known in round 0 and refused in
        // round 1, before anything dies.
        ("ip and 0 / (ip[21] % 0) != ip[2]", modulus),
        // An oversized shift is refused when it is made an immediate,
        // with the accumulator not yet known, even if it is known (and
        // shifted out by `fold_op`) a round later.
        ("ip and ((ip[3] & 0) << tcpflags) >> -tcpflags < 0", shift),
        ("ip and -(ip[3] & 0) >> -1 > tcpflags", shift),
        ("ip and (0 & ip[3]) >> -1 > tcpflags", None),
    ];
    for (filter, reason) in cases {
        let theirs = pcap.compile(filter).err().map(|e| e.to_string());
        let ours = dpf::compile(filter).err().map(|e| e.to_string());
        for (who, got) in [("libpcap", &theirs), ("dpf", &ours)] {
            match (reason, got) {
                (None, None) => {}
                (Some(r), Some(e)) if e.contains(r) => {}
                _ => panic!("{who} on {filter}: expected {reason:?}, got {got:?}"),
            }
        }
    }
}

/// Random arithmetic rich in zeros libpcap knows only in its second pass
/// (`ip[3] & 0`, `0 * ip[5]`), divisions, moduli and shifts, in
/// comparisons under `and`, `or` and `not`: dpf must refuse exactly the
/// filters libpcap refuses for a zero divisor or an oversized shift, for
/// the same reason. `DPF_SEED` seeds it, `DPF_ARITH` sets the number of
/// filters (default 20,000). Before dead statements were modelled
/// ([`a_refusal_whose_statement_dies_first_is_never_made`]) it failed at
/// its default seed.
#[test]
fn arithmetic_refusals_agree_with_libpcap() {
    use rand::SeedableRng;
    let Some(pcap) = libpcap_or_skip() else {
        return;
    };
    let count = env_u64("DPF_ARITH", 20_000);
    let seed = env_u64("DPF_SEED", 0x00d9_f5ee_d001);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    fn leaf(rng: &mut rand::rngs::StdRng) -> String {
        let r: f64 = rng.random();
        let pick = |rng: &mut rand::rngs::StdRng, of: &[&str]| {
            of[rng.random_range(0..of.len())].to_string()
        };
        if r < 0.3 {
            pick(rng, &["0", "0", "1", "3", "40", "33"])
        } else if r < 0.5 {
            format!("ip[{}]", rng.random_range(0..31))
        } else if r < 0.6 {
            format!("ip[{}:4]", rng.random_range(0..21))
        } else if r < 0.75 {
            pick(
                rng,
                &["(ip[3] & 0)", "(0 * ip[5])", "(ip[7] * 0)", "(0 & ip[1])"],
            )
        } else {
            pick(rng, &["len", "icmptype", "tcpflags"])
        }
    }
    fn expr(rng: &mut rand::rngs::StdRng, depth: u32) -> String {
        if depth == 0 || rng.random_bool(0.2) {
            return leaf(rng);
        }
        let r: f64 = rng.random();
        if r < 0.1 {
            format!("-({})", expr(rng, depth - 1))
        } else if r < 0.15 {
            format!("ip[{}]", expr(rng, depth - 1))
        } else {
            const OPS: [&str; 10] = ["+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>"];
            let op = OPS[rng.random_range(0..OPS.len())];
            format!("({} {op} {})", expr(rng, depth - 1), expr(rng, depth - 1))
        }
    }
    const REASONS: [&str; 3] = [
        "division by zero",
        "modulus by zero",
        "shift by more than 31 bits",
    ];
    let reason = |e: Option<String>| e.and_then(|e| REASONS.into_iter().find(|r| e.contains(r)));
    let mut refused = 0;
    for _ in 0..count {
        const RELS: [&str; 5] = [">", "=", "!=", "<", ">="];
        let rel = RELS[rng.random_range(0..RELS.len())];
        let depth = rng.random_range(2..6);
        let e = format!("{} {rel} {}", expr(&mut rng, depth), expr(&mut rng, 2));
        let filter = match rng.random_range(0..4) {
            0 => format!("ip and {e}"),
            1 => format!(
                "({} > {} and {e}) or ip",
                expr(&mut rng, 1),
                expr(&mut rng, 1)
            ),
            2 => format!("not ({e}) or tcp"),
            _ => format!("ip6 or {e}"),
        };
        let theirs = reason(pcap.compile(&filter).err().map(|e| e.to_string()));
        let ours = reason(dpf::compile(&filter).err().map(|e| e.to_string()));
        assert_eq!(ours, theirs, "dpf against libpcap on {filter}");
        refused += usize::from(theirs.is_some());
    }
    println!("{count} filters, {refused} refused by both, seed {seed:#x}");
}

/// A comparison whose left side only libpcap's second pass folds to a
/// constant (`9 >> 24`) is not the same accumulator value as that
/// constant written out: the first pass's pull-up does not move a later
/// `0 = arp[6:4]` above its ARP test, so a short non-ARP frame matches.
/// Written as `0 >= 28`, libpcap does move it, and the load past the
/// frame's end rejects.
#[test]
fn a_side_folded_late_is_not_the_constant_written_out() {
    let Some(pcap) = libpcap_or_skip() else {
        return;
    };
    // 19 bytes, Ethernet type 0x0005 (802.3 length), a Netware raw frame.
    let pkt = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x5c, 0xe0, 0xf6, 0xc1, 0xbb, 0x19, 0x00, 0x05, 0xff,
        0xff, 0x05, 0xc1, 0x4b,
    ];
    for (filter, matches) in [
        ("9 >> 24 >= 28 || (not 0 = arp[6:4])", true),
        (
            "9 >> 24 >= 28 || (not icmptype = -arp[6:4] >> arp[0] - ether[9:1]) and ! llc rej",
            true,
        ),
        ("0 >= 28 || (not 0 = arp[6:4])", false),
    ] {
        agree_on(&pcap, filter, &pkt, matches);
    }
}

/// Two numbers compared with `=` (`16 = 10`, `sub x; jeq #0`) are decided
/// a round of libpcap's first pass later than with `>` or `>=` (`jgt x`):
/// its first round only merges the constant X into the jump. By then an
/// edge has moved so that the protocol test before the comparison is
/// reached by two edges that each know IPv4 and that neither dominates,
/// and it keeps its load of byte 23, which rejects a 20-byte IPv4 frame.
/// Found by the random test at a million pairs (seed 0).
#[test]
fn two_numbers_compared_with_equals_are_decided_a_round_later() {
    let Some(pcap) = libpcap_or_skip() else {
        return;
    };
    // 20 bytes: Ethernet, type IPv4, six bytes of its header.
    let pkt = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x5c, 0xe0, 0xf6, 0xc1, 0xbb, 0x19, 0x08, 0x00, 0x45,
        0x00, 0x00, 0x14, 0x00, 0x00,
    ];
    let with = |cmp: &str| {
        format!("(not (llc and host 172.16.5.4) and (not ip proto 6 and {cmp})) or not arp")
    };
    for (filter, matches) in [
        (with("16 = 10"), false),
        (with("16 != 16"), false),
        (with("10 > 16"), true),
        (with("10 >= 16"), true),
    ] {
        agree_on(&pcap, &filter, &pkt, matches);
    }
}

/// A field compared with a number (`ether[14:2] > 4`) and the same field
/// compared with a computed value (`ether[14:2] >= ip[28:4]`) leave one
/// value in the accumulator, both loaded through X, so libpcap's and-
/// pull-up moves the second comparison above its IPv4 test, and its load
/// of `ip[28:4]` then rejects a short ARP frame. A masked field is
/// another value, and is not moved. Found by the random test at a million
/// pairs (seed 2).
#[test]
fn a_field_compared_with_a_number_and_with_a_value_is_one_accumulator() {
    let Some(pcap) = libpcap_or_skip() else {
        return;
    };
    // 29 bytes: Ethernet, type ARP, `ether[14:2]` = 0x0500.
    let mut pkt = vec![0u8; 29];
    pkt[12..16].copy_from_slice(&[0x08, 0x06, 0x05, 0x00]);
    for (filter, matches) in [
        ("ether[14:2] <= 0x4 or ! ether[14:2] >= ip[28:4]", false),
        ("ether[14:2] <= 0x4 or ! ether[14:2] > ip[28:4]", false),
        ("ether[14:2] <= 0x4 or ! ether[14:2] = ip[28:4]", false),
        (
            "ether[14:2] & 0xff00 <= 0x400 or ! ether[14:2] & 0xff00 >= ip[28:4]",
            false,
        ),
        (
            "ether[14:2] & 0xff00 <= 0x400 or ! ether[14:2] >= ip[28:4]",
            true,
        ),
        (
            "vlan or ether[14:2] <= 0x4 or ! ether[14:2] >= ip[28:4] << 7 * ether[15:4]",
            false,
        ),
    ] {
        agree_on(&pcap, filter, &pkt, matches);
    }
}

/// In the first round of libpcap's first pass a user's equality is still
/// gencode's `sub x; jeq #0`: the accumulator holds the difference, so
/// `len = 0` having held decides nothing of `len = 42` until the next
/// round, by when the tests between them have folded away. libpcap then
/// tests only the EtherType's load and `len = 42`, and accepts a 31-byte
/// IPv4 frame that dpf, deciding it a round early, rejected by `ip[25]`.
#[test]
fn an_equality_knows_only_itself_in_the_first_round() {
    let Some(pcap) = libpcap_or_skip() else {
        return;
    };
    let mut pkt = vec![0u8; 31];
    pkt[12..15].copy_from_slice(&[0x08, 0x00, 0x45]);
    agree_on(
        &pcap,
        "not ((ip[25] * (ip[8] % 31) - (ether[2]) <= 255 && net 10) && ! len != 0 && src net \
         192.168) || net 0.0.0.0/0 and len != 42",
        &pkt,
        true,
    );
}

/// libpcap's first pass moves some filters' edges in a cycle, and ends it
/// after 100 rounds in a row of edge moves alone, taking it for one. dpf
/// moved them on until its work budget refused the filter, after 7 s of
/// CPU for this one (found by the random test at depth 3, seed 11); it
/// now counts the rounds as libpcap does and stops where it stops, so
/// the programs agree on every truncation of frames that reach each test.
#[test]
fn a_first_pass_that_cycles_stops_where_libpcaps_does() {
    let Some(pcap) = libpcap_or_skip() else {
        return;
    };
    let filter = "(not tcp[4] & 017777 > 0 or ! icmp[3:2] & 0xf0 < 0x0) && not ((ip host \
                  172.16.5.4 || 10.0.0.1) && not host 172.16.5.4 && not (ip6 multicast or ip \
                  host 10.0.0.2 and (arp src or dst 10.0.0.2 && not ether[6] == 0377 || llc \
                  rej)))";
    let bpf = pcap.compile(filter).expect("libpcap compiles it");
    let ours = dpf::compile(filter).expect("dpf compiles it");
    let frame = |src: [u8; 4], dst: [u8; 4], proto: u8| {
        let mut f = vec![0u8; 14 + 20 + 20];
        f[12..15].copy_from_slice(&[0x08, 0x00, 0x45]);
        f[23] = proto;
        f[26..30].copy_from_slice(&src);
        f[30..34].copy_from_slice(&dst);
        f
    };
    let mut llc = vec![0u8; 20];
    llc[12..17].copy_from_slice(&[0x00, 0x06, 0xe0, 0xe0, 0x09]);
    let frames = [
        frame([10, 0, 0, 1], [10, 0, 0, 2], 6),
        frame([10, 0, 0, 2], [192, 168, 1, 1], 1),
        frame([172, 16, 5, 4], [10, 0, 0, 1], 17),
        frame([10, 0, 0, 1], [192, 168, 1, 1], 6),
        llc,
    ];
    let mut matched = 0;
    for f in &frames {
        for len in 0..=f.len() {
            let pkt = &f[..len];
            let theirs = bpf.matches(pkt);
            matched += usize::from(theirs);
            assert_eq!(
                ours.matches(pkt),
                theirs,
                "{len} bytes of {}:\n{}",
                hex(f),
                dpf::dump(&ours)
            );
        }
    }
    assert!(matched > 0, "some truncation matches");
}

/// libpcap gives `filter` the verdict `matches` on `pkt`, and dpf does too.
fn agree_on(pcap: &dpf::pcap::Libpcap, filter: &str, pkt: &[u8], matches: bool) {
    let bpf = pcap.compile(filter).expect("libpcap compiles it");
    assert_eq!(bpf.matches(pkt), matches, "libpcap on {filter}");
    let ours = dpf::compile(filter).expect("dpf compiles it");
    assert_eq!(
        ours.matches(pkt),
        matches,
        "dpf on {filter}:\n{}",
        dpf::dump(&ours)
    );
}

/// The one disagreement the random test steers around on purpose
/// ([`repeats_a_masked_ipv6_prefix`]): libpcap 1.10.3 accepts a packet
/// from 2001:db8::1 for `src net 2001:db8::/48 and not src net
/// 2001:db8::/48`, which no packet matches; dpf keeps the meaning. The
/// detector names exactly the filters of that shape here, and a prefix
/// with no such word, or two different prefixes, are compared as usual.
#[test]
fn a_repeated_masked_ipv6_prefix_keeps_its_meaning() {
    let mut frame = vec![0u8; 14 + 40];
    frame[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
    frame[14] = 0x60;
    frame[22..38].copy_from_slice(&v6("2001:db8::1"));
    for (filter, repeats, matches) in [
        (
            "src net 2001:db8::/48 and not src net 2001:db8::/48",
            true,
            false,
        ),
        (
            "src net 2001:db8::/48 and src net 2001:db8::/48",
            true,
            true,
        ),
        (
            "not src net 2001:db8::/127 and src net 2001:db8::/127",
            true,
            false,
        ),
        (
            "vlan or net 2001:db8::/48 and not net 2001:db8::/48",
            true,
            false,
        ),
        (
            "src net 2001:db8::/32 and not src net 2001:db8::/32",
            false,
            false,
        ),
        (
            "src net 2001:db8::/48 and not src net 2001:db8::/64",
            false,
            false,
        ),
        ("src net 2001:db8::/48 and host 2001:db8::1", false, true),
    ] {
        assert_eq!(repeats_a_masked_ipv6_prefix(filter), repeats, "{filter}");
        let ours = dpf_compile(filter).unwrap_or_else(|e| panic!("{filter}: {e}"));
        for (who, got) in dpf_verdicts(&ours, &frame) {
            assert_eq!(got, matches, "{filter}: dpf {who}");
        }
        // Where libpcap has no such miscompile, it agrees.
        if let (false, Some(pcap)) = (repeats, libpcap_or_skip()) {
            let want = pcap.compile(filter).is_ok_and(|b| b.matches(&frame));
            assert_eq!(want, matches, "{filter}: libpcap");
        }
    }
}
