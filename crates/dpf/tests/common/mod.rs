//! Seeded generators shared by dpf's integration tests: random filters
//! from the grammar of `docs/dpf.md`, and realistic Ethernet frames to run
//! them on.
//!
//! Addresses, ports and protocol numbers come from small pools shared by
//! both generators, so that a healthy fraction of (filter, packet) pairs
//! match. Packets cover IPv4 with and without options (IHL 5 to 15),
//! fragments, TCP/UDP/ICMP/SCTP, IPv6 with and without a fragment header,
//! ARP and RARP, 802.1Q tags (IPv4 or IPv6 behind them), MPLS label
//! stacks, 802.3/LLC frames (I, S and U control bytes, Netware raw
//! 802.3), PPPoE discovery and session, garbage, and truncation at the
//! lengths where filters' loads begin to fail.

#![allow(dead_code)]

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use codecache::{CodeCache, Config};
use dpf::ebpf::{OnAccept, XdpProgram};
use dpf::ir::Program;
use dpf::pcap::Libpcap;
use dpf::{Reader, Table};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// libpcap, loaded; `None` (with the reason printed) when it is not
/// installed, and a panic instead when `DPF_REQUIRE_LIBPCAP=1` (as in CI).
pub fn libpcap_or_skip() -> Option<Libpcap> {
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

/// The IPv4 hosts filters and packets draw from.
pub const HOSTS: [[u8; 4]; 5] = [
    [10, 0, 0, 1],
    [10, 0, 0, 2],
    [10, 1, 2, 3],
    [192, 168, 1, 1],
    [172, 16, 5, 4],
];
/// Networks containing (some of) [`HOSTS`], as filter text.
pub const NETS: [&str; 9] = [
    "10.0.0.0/8",
    "10.0.0.0/24",
    "192.168.0.0/16",
    "172.16.0.0/12",
    "0.0.0.0/0",
    "10.0.0.0 mask 255.255.0.0",
    "10",
    "192.168",
    "10.0.0.2/32",
];
/// The IPv6 hosts filters and packets draw from, as filter text (a
/// loopback, a link-local, an IPv4-mapped and documentation addresses).
pub const HOSTS6: [&str; 6] = [
    "2001:db8::1",
    "2001:db8::2",
    "2001:db8:1::5",
    "fe80::1",
    "::1",
    "::ffff:10.0.0.1",
];
/// IPv6 networks containing (some of) [`HOSTS6`], as filter text: prefix
/// lengths on a word's boundary and inside one, the whole space, and an
/// address alone (`/128`).
pub const NETS6: [&str; 9] = [
    "2001:db8::/32",
    "2001:db8::/48",
    "2001:db8:1::/48",
    "fe80::/10",
    "::/0",
    "::1",
    "2001:db8::/127",
    "2001:db8:0:0:8000::/65",
    "::ffff:0:0/96",
];
/// The ports filters and packets draw from.
pub const PORTS: [u16; 8] = [22, 53, 67, 68, 80, 443, 1024, 8080];
/// Port ranges, as filter text.
pub const RANGES: [&str; 8] = [
    "20-90",
    "1000-1100",
    "443-443",
    "9000-50",
    "80",
    "ssh-http",
    "domain-22",
    "bootps-bootpc",
];
/// MAC addresses filters and frames draw from: unicast, IPv4 and IPv6
/// multicast, broadcast.
pub const MACS: [[u8; 6]; 4] = [
    [0x00, 0x11, 0x22, 0x33, 0x44, 0x55],
    [0x01, 0x00, 0x5e, 0x00, 0x00, 0x01],
    [0x33, 0x33, 0x00, 0x00, 0x00, 0x01],
    [0xff; 6],
];
/// DECnet addresses (area, node) filters and frames draw from.
pub const DECNET: [(u16, u16); 4] = [(50, 764), (1, 2), (63, 1023), (0, 0)];
/// Service names filters draw from (`port NAME`).
pub const PORT_NAMES: [&str; 4] = ["ssh", "http", "bootps", "domain"];

/// A seeded random generator of filters and packets.
pub struct Gen {
    /// The random source.
    pub rng: StdRng,
    /// Arithmetic mode: comparisons with arithmetic, `len`, `less` and
    /// `greater`, and nothing that reads behind the IPv4 header (ports,
    /// `tcp[...]`, ...). libpcap 1.10's optimizer moves or deletes the
    /// `ldxb 4*([14]&0xf)` those need when arithmetic leaves a value in X
    /// (see docs/dpf.md), which dpf does not reproduce.
    pub arith: bool,
}

/// A MAC address in one of the spellings libpcap reads.
fn mac_text(m: [u8; 6], style: usize) -> String {
    let h: Vec<String> = m.iter().map(|b| format!("{b:02x}")).collect();
    match style % 4 {
        0 => h.join(":"),
        1 => h.join("-"),
        2 => format!("{}{}.{}{}.{}{}", h[0], h[1], h[2], h[3], h[4], h[5]),
        _ => m
            .iter()
            .map(|b| format!("{b:x}"))
            .collect::<Vec<_>>()
            .join("."),
    }
}

fn quad(a: [u8; 4]) -> String {
    format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3])
}

impl Gen {
    /// A generator with a fixed seed.
    pub fn new(seed: u64) -> Self {
        Gen {
            rng: StdRng::seed_from_u64(seed),
            arith: false,
        }
    }

    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.rng.random_range(0..xs.len())]
    }

    fn chance(&mut self, p: f64) -> bool {
        self.rng.random_bool(p)
    }

    fn dir(&mut self) -> &'static str {
        const DIRS: [&str; 7] = ["", "", "", "src ", "dst ", "src or dst ", "src and dst "];
        self.pick::<&str>(&DIRS)
    }

    fn number(&mut self, v: u32) -> String {
        match self.rng.random_range(0..4) {
            0 => format!("{v:#x}"),
            // Twelve octal digits would be a MAC address to pcap.
            1 if v != 0 && v < 0o1_000_000_000 => format!("0{v:o}"),
            _ => v.to_string(),
        }
    }

    /// A value for a host-like qualifier (used for implicit qualifiers).
    fn host_value(&mut self) -> String {
        quad(*self.pick(&HOSTS))
    }

    /// An IPv6 `host` or `net` primitive, and a value that may follow it:
    /// IPv6 mostly, IPv4 now and then where no `ip6` forbids it (the
    /// inherited qualifier takes either address). Only valid filters, as
    /// everywhere here: the qualifiers libpcap refuses for an IPv6 address
    /// are the parser tests'.
    fn primitive6(&mut self, net: bool) -> (String, Option<String>) {
        let proto = *self.pick(&["", "ip6 "]);
        let dir = self.dir();
        let pool: &[&str] = if net { &NETS6 } else { &HOSTS6 };
        let v = *self.pick(pool);
        let next = if !proto.is_empty() || self.chance(0.8) {
            self.pick(pool).to_string()
        } else if net {
            self.pick(&NETS).to_string()
        } else {
            self.host_value()
        };
        let kw = if net {
            "net "
        } else if dir.is_empty() || self.chance(0.5) {
            "host "
        } else {
            ""
        };
        (format!("{proto}{dir}{kw}{v}"), Some(next))
    }

    /// One primitive, with the text of a bare value that may follow it
    /// with the same qualifiers (`None` when it leaves none).
    fn primitive(&mut self) -> (String, Option<String>) {
        match self.rng.random_range(0..20) {
            0..=2 => (
                self.pick(&[
                    "ip",
                    "ip6",
                    "arp",
                    "rarp",
                    "tcp",
                    "udp",
                    "icmp",
                    "sctp",
                    "icmp6",
                    "ip6 proto 6",
                    "ip6 proto \\udp",
                    "ip6 proto 58",
                    "proto 17",
                    "proto \\tcp",
                    "broadcast",
                    "ether multicast",
                    "ip multicast",
                    "ip6 multicast",
                    "ip proto \\igmp",
                    "ip6 proto ipv6-icmp",
                    "proto 6 or udp",
                    "proto ipv6-icmp or 1",
                    "igmp",
                    "vrrp",
                    "decnet",
                    "ether proto \\lat",
                    "iso",
                    "stp",
                    "llc",
                    "llc i",
                    "llc s",
                    "llc u",
                    "llc rr",
                    "llc rnr",
                    "llc rej",
                    "llc ui",
                    "llc ua",
                    "llc disc",
                    "llc dm",
                    "llc sabme",
                    "llc test",
                    "llc xid",
                    "llc frmr",
                    "pppoed",
                    "clnp",
                    "esis",
                    "es-is",
                    "isis",
                    "is-is",
                    "atalk",
                    "aarp",
                    "ipx",
                    "iso proto 0x82",
                    "iso proto \\clnp or \\isis",
                    "iso proto 0x83 or 0x81",
                    "isis proto 17",
                    "isis proto 0x1a or 24",
                    "l1",
                    "l2",
                    "iih",
                    "lsp",
                    "snp",
                    "csnp",
                    "psnp",
                ])
                .to_string(),
                None,
            ),
            3 if self.chance(0.5) => {
                let style = self.rng.random_range(0..4);
                let m = mac_text(*self.pick(&MACS), style);
                let dir = self.dir();
                let kw = if dir.is_empty() || self.chance(0.5) {
                    "host "
                } else {
                    ""
                };
                let next = mac_text(*self.pick(&MACS), style + 1);
                (format!("ether {dir}{kw}{m}"), Some(next))
            }
            3 => {
                let p = *self.pick(&[
                    "0x800",
                    "0x806",
                    "0x86dd",
                    "0x8035",
                    "0x8100",
                    "\\ip",
                    "\\arp",
                    "\\ip6",
                    "0x42",
                    "170",
                    "6",
                    "0xfe",
                    "\\netbeui",
                    "\\stp",
                    "\\ipx",
                    "0xe0",
                    "\\atalk",
                    "0x80f3",
                ]);
                (format!("ether proto {p}"), None)
            }
            4 if self.chance(0.25) => {
                let dir = self.dir();
                let kw = if dir.is_empty() || self.chance(0.5) {
                    "host "
                } else {
                    ""
                };
                let (area, node) = *self.pick(&DECNET);
                let (a, n) = *self.pick(&DECNET);
                (
                    format!("decnet {dir}{kw}{area}.{node}"),
                    Some(format!("{a}.{n}")),
                )
            }
            4 => {
                let p = self.pick(&["1", "6", "17", "132", "\\tcp", "\\udp", "\\icmp", "2"]);
                let next = self.pick(&["6", "17", "1"]).to_string();
                (format!("ip proto {p}"), Some(next))
            }
            5..=7 if self.chance(0.3) => self.primitive6(false),
            8 | 9 if self.chance(0.3) => self.primitive6(true),
            5..=7 => {
                let proto = *self.pick(&["", "", "ip ", "arp ", "rarp "]);
                let kw = *self.pick(&["host ", "host ", ""]);
                let dir = self.dir();
                let kw = if dir.is_empty() && kw.is_empty() {
                    "host "
                } else {
                    kw
                };
                let h = self.host_value();
                let next = self.host_value();
                (format!("{proto}{dir}{kw}{h}"), Some(next))
            }
            8 | 9 => {
                let proto = *self.pick(&["", "", "ip ", "arp ", "rarp "]);
                let dir = self.dir();
                let n = *self.pick(&NETS);
                (
                    format!("{proto}{dir}net {n}"),
                    Some(self.pick(&NETS).to_string()),
                )
            }
            10..=13 if self.arith => (self.arith_comparison(), None),
            10..=12 => {
                let proto = *self.pick(&["", "", "tcp ", "udp ", "sctp "]);
                let dir = self.dir();
                if self.chance(0.25) {
                    // A service name, resolved through /etc/services: TCP
                    // only (ssh, http), UDP only (bootps) or both (domain).
                    // Only names the qualifier allows: `udp port http`
                    // is an error of libpcap's and dpf's alike.
                    let names: &[&str] = match proto {
                        "tcp " => &["ssh", "http", "domain"],
                        "udp " => &["bootps", "domain"],
                        "sctp " => &["domain"],
                        _ => &PORT_NAMES,
                    };
                    let name = *self.pick(names);
                    return (format!("{proto}{dir}port {name}"), None);
                }
                let p = self.pick(&PORTS).to_string();
                let next = self.pick(&PORTS).to_string();
                (format!("{proto}{dir}port {p}"), Some(next))
            }
            13 => {
                let proto = *self.pick(&["", "tcp ", "udp "]);
                let dir = self.dir();
                let r = match (proto, *self.pick(&RANGES)) {
                    ("udp ", "ssh-http") | ("tcp ", "bootps-bootpc") => "80",
                    (_, r) => r,
                };
                (
                    format!("{proto}{dir}portrange {r}"),
                    Some(self.pick(&RANGES[..4]).to_string()),
                )
            }
            _ if !self.arith => (self.comparison(), None),
            14 | 15 | 17 => (self.arith_comparison(), None),
            16 => (self.length_test(), None),
            _ => (self.comparison(), None),
        }
    }

    /// `len`, `less` and `greater` around the lengths frames have.
    fn length_test(&mut self) -> String {
        let n = *self.pick(&[0u32, 14, 34, 42, 54, 60, 64, 100, 1500]);
        match self.rng.random_range(0..4) {
            0 => format!("less {n}"),
            1 => format!("greater {n}"),
            _ => {
                let op = *self.pick(&["=", "!=", "<", "<=", ">", ">="]);
                format!("len {op} {n}")
            }
        }
    }

    /// An operand of an arithmetic expression: a number, a named value,
    /// `len`, or a packet field whose index may itself be computed.
    fn arith_operand(&mut self, depth: u32) -> String {
        match self.rng.random_range(0..10) {
            0 | 1 => self.rng.random_range(0..=40u32).to_string(),
            2 => self
                .pick(&[
                    "0x45",
                    "0xf",
                    "6",
                    "255",
                    "1500",
                    "0xffffffff",
                    "icmptype",
                    "icmpcode",
                    "tcpflags",
                    "tcp-syn",
                    "tcp-ack",
                    "tcp-fin",
                    "icmp-echo",
                    "icmp-echoreply",
                    "icmp6type",
                    "icmp6-echo",
                ])
                .to_string(),
            3 => "len".into(),
            _ => {
                let layer = *self.pick(&["ether", "ether", "ip", "ip", "ip6", "arp", "icmp6"]);
                let index = if depth > 0 && self.chance(0.3) {
                    self.arith(depth - 1)
                } else {
                    self.rng.random_range(0..=30u32).to_string()
                };
                let size = *self.pick(&["", "", ":1", ":2", ":4"]);
                format!("{layer}[{index}{size}]")
            }
        }
    }

    /// An arithmetic expression: a chain of operands joined by random
    /// operators, unparenthesized (so libpcap's precedences decide), with
    /// operands sometimes parenthesized or negated.
    pub fn arith(&mut self, depth: u32) -> String {
        let mut s = self.arith_operand(depth);
        for _ in 0..self.rng.random_range(0..=2) {
            let op = *self.pick(&["+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>"]);
            let rhs = if depth > 0 && self.chance(0.25) {
                format!("({})", self.arith(depth - 1))
            } else if matches!(op, "<<" | ">>") && self.chance(0.7) {
                self.rng.random_range(0..=31u32).to_string()
            } else {
                self.arith_operand(depth)
            };
            s = format!("{s} {op} {rhs}");
        }
        if self.chance(0.1) {
            s = format!("-{s}");
        }
        s
    }

    /// `arith relop arith`, or a named-value idiom.
    pub fn arith_comparison(&mut self) -> String {
        if self.chance(0.15) {
            return self
                .pick(&[
                    "icmp6[icmp6type] = icmp6-echo",
                    "icmp6[icmp6type] != icmp6-echo and icmp6[icmp6code] = 0",
                    "ip[2:2] - ((ip[0] & 0xf) << 2) > 40",
                    "ip[0] & 0xf != 5",
                    "ether[0] & 1 = 0 and ip[16] >= 224",
                    "ip[6:2] & 0x3fff != 0",
                ])
                .to_string();
        }
        let op = *self.pick(&["=", "==", "!=", "<", "<=", ">", ">="]);
        let lhs = self.arith(1);
        let rhs = if self.chance(0.5) {
            self.rng.random_range(0..=64u32).to_string()
        } else {
            self.arith(1)
        };
        format!("{lhs} {op} {rhs}")
    }

    /// `layer[offset:size] [& mask] op value`.
    pub fn comparison(&mut self) -> String {
        const LAYERS: [&str; 12] = [
            "ether", "ether", "ip", "ip", "ip6", "arp", "rarp", "tcp", "tcp", "udp", "icmp", "sctp",
        ];
        let layers = if self.arith {
            &LAYERS[..7]
        } else {
            &LAYERS[..]
        };
        let layer = *self.pick(layers);
        let size = *self.pick(&[1u32, 1, 2, 2, 4]);
        let offset: u32 = match self.rng.random_range(0..10) {
            0 => self.rng.random_range(40..200),
            1 => self.rng.random_range(1400..1600),
            _ => match layer {
                "ether" => *self.pick(&[0, 6, 12, 13, 14, 20, 23, 26, 30, 34, 36, 54, 56]),
                "ip" => *self.pick(&[0, 1, 6, 8, 9, 12, 16, 20, 22]),
                "arp" | "rarp" => *self.pick(&[0, 2, 6, 7, 14, 24]),
                "ip6" => *self.pick(&[0, 4, 6, 7, 8, 24, 40]),
                _ => *self.pick(&[0, 1, 2, 3, 4, 8, 12, 13]),
            },
        };
        let size_text = match (size, self.chance(0.2)) {
            (1, false) => String::new(),
            (s, _) => format!(":{s}"),
        };
        let max = if size == 4 {
            u32::MAX
        } else {
            (1u32 << (8 * size)) - 1
        };
        // No `& 0` on a transport layer: libpcap 1.10's optimizer then
        // deletes the `ldxb` that a following port test relies on and
        // loads the port from the wrong offset (see docs/dpf.md).
        let transport = matches!(layer, "tcp" | "udp" | "icmp" | "sctp");
        let mask = match self.rng.random_range(0..12) {
            0..=5 => None,
            6 if transport => Some(0xff),
            6 => Some(0),
            7 => Some(u32::MAX),
            8 => Some(0xf0),
            9 => Some(0x12),
            10 => Some(0x1fff),
            // Never 0 on a transport layer (above).
            _ => Some(self.rng.random::<u32>() & max).filter(|&m| m != 0 || !transport),
        };
        let op = *self.pick(&["=", "==", "!=", "<", "<=", ">", ">="]);
        let value = match self.rng.random_range(0..8) {
            0 => 0,
            1 => *self.pick(&[0x45, 6, 17, 1, 0x800, 0x86dd, 80, 53, 0x12, 2, 0x40]),
            2 => max,
            3 => self.rng.random::<u32>() & max,
            4 => self.rng.random::<u32>(),
            5 => mask.unwrap_or(1),
            _ => self.rng.random_range(0..=16),
        };
        let mask_text = match mask {
            Some(m) => format!(" & {}", self.number(m)),
            None => String::new(),
        };
        format!(
            "{layer}[{offset}{size_text}]{mask_text} {op} {}",
            self.number(value)
        )
    }

    fn term(&mut self, depth: u32) -> String {
        let neg = match self.rng.random_range(0..6) {
            0 => "not ",
            1 => "! ",
            _ => "",
        };
        if depth > 0 && self.chance(0.3) {
            return format!("{neg}({})", self.expr(depth - 1));
        }
        let (p, next) = self.primitive();
        match next {
            // pcap's implicit qualifier: `host a or b`.
            Some(v) if self.chance(0.15) => {
                let op = *self.pick(&["or", "and", "and not", "||"]);
                format!("{neg}({p} {op} {v})")
            }
            _ => format!("{neg}{p}"),
        }
    }

    /// A random filter: a left-to-right chain of terms joined by
    /// `and`/`or` (pcap gives them equal precedence), nested to `depth`.
    pub fn expr(&mut self, depth: u32) -> String {
        let n = self.rng.random_range(1..=3);
        let mut s = self.term(depth);
        for _ in 1..n {
            let op = *self.pick(&["and", "or", "&&", "||"]);
            s = format!("{s} {op} {}", self.term(depth));
        }
        s
    }

    /// A random filter of the default depth.
    pub fn filter(&mut self) -> String {
        let e = self.expr(2);
        if !self.chance(0.15) {
            return e;
        }
        // `vlan` last, once or twice (the differential test puts it
        // first too).
        let mut f = format!("({e})");
        for _ in 0..self.rng.random_range(1..=2) {
            let op = *self.pick(&[" and ", " or ", " and not "]);
            let id = match self.rng.random_range(0..3) {
                0 => String::new(),
                _ => format!(" {}", self.pick(&[1u16, 100, 4095, 0])),
            };
            f = format!("{f}{op}vlan{id}");
        }
        f
    }

    fn ipv4_addr(&mut self) -> [u8; 4] {
        if self.chance(0.8) {
            *self.pick(&HOSTS)
        } else {
            self.rng.random()
        }
    }

    fn port(&mut self) -> u16 {
        if self.chance(0.7) {
            *self.pick(&PORTS)
        } else {
            self.rng.random()
        }
    }

    /// A transport header of `proto` (at least 20 bytes, so that every
    /// generated comparison has something to load).
    fn transport(&mut self, proto: u8) -> Vec<u8> {
        let mut t: Vec<u8> = (0..20 + self.rng.random_range(0..20))
            .map(|_| self.rng.random())
            .collect();
        match proto {
            6 | 17 | 132 => {
                let (s, d) = (self.port(), self.port());
                t[0..2].copy_from_slice(&s.to_be_bytes());
                t[2..4].copy_from_slice(&d.to_be_bytes());
                if proto == 6 && self.chance(0.5) {
                    t[13] = *self.pick(&[0x02, 0x12, 0x10, 0x18, 0x11]);
                }
            }
            1 => t[0] = *self.pick(&[0, 8, 3, 11]),
            _ => {}
        }
        t
    }

    fn ip_proto(&mut self) -> u8 {
        *self.pick(&[6, 6, 17, 17, 1, 132, 2, 47, 112])
    }

    fn ethernet(&mut self, ethertype: u16) -> Vec<u8> {
        let mut f: Vec<u8> = (0..12).map(|_| self.rng.random()).collect();
        if self.chance(0.3) {
            let at = *self.pick(&[0, 6]);
            let m = *self.pick(&MACS);
            f[at..at + 6].copy_from_slice(&m);
        }
        if self.chance(0.1) {
            // The broadcast destination (`broadcast` matches nothing else).
            f[..6].fill(0xff);
        }
        f.extend_from_slice(&ethertype.to_be_bytes());
        f
    }

    fn ipv4(&mut self) -> Vec<u8> {
        let proto = self.ip_proto();
        let ihl: u8 = if self.chance(0.6) {
            5
        } else {
            self.rng.random_range(5..=15)
        };
        let mut h = vec![0u8; 4 * usize::from(ihl)];
        h[0] = 0x40 | ihl;
        h[1] = self.rng.random();
        h[8] = 64;
        h[9] = proto;
        if self.chance(0.25) {
            // A fragment: MF and/or a nonzero offset.
            let off: u16 = if self.chance(0.5) {
                self.rng.random_range(1..0x1fff)
            } else {
                0
            };
            let mf: u16 = if off == 0 || self.chance(0.5) {
                0x2000
            } else {
                0
            };
            h[6..8].copy_from_slice(&(mf | off).to_be_bytes());
        } else if self.chance(0.3) {
            h[6] = 0x40; // DF
        }
        let (s, d) = (self.ipv4_addr(), self.ipv4_addr());
        h[12..16].copy_from_slice(&s);
        h[16..20].copy_from_slice(&d);
        for b in &mut h[20..] {
            *b = if self.chance(0.5) {
                1
            } else {
                self.rng.random()
            };
        }
        let t = self.transport(proto);
        let total = (h.len() + t.len()) as u16;
        h[2..4].copy_from_slice(&total.to_be_bytes());
        h.extend(t);
        h
    }

    fn ipv6(&mut self) -> Vec<u8> {
        let proto = *self.pick(&[6, 17, 132, 58]);
        let mut h = vec![0u8; 40];
        h[0] = 0x60;
        h[7] = 64;
        for b in &mut h[8..40] {
            *b = self.rng.random();
        }
        // About one destination in five multicast (ff00::/8) for `ip6
        // multicast`, decided by a byte already drawn so the stream of
        // random numbers is the same as without it.
        if h[25] < 0x33 {
            h[24] = 0xff;
        }
        // Each address one of the pool's half the time, for `host` and
        // `net` with an IPv6 address.
        for at in [8, 24] {
            if self.chance(0.5) {
                let a: std::net::Ipv6Addr = self.pick(&HOSTS6).parse().expect("an IPv6 address");
                h[at..at + 16].copy_from_slice(&a.octets());
            }
        }
        if self.chance(0.3) {
            h[6] = 44;
            let mut frag = vec![proto, 0, 0, 0, 1, 2, 3, 4];
            if self.chance(0.5) {
                frag[3] = 1; // M flag
            }
            h.extend(frag);
        } else {
            h[6] = proto;
        }
        h.extend(self.transport(proto));
        h
    }

    fn arp(&mut self) -> Vec<u8> {
        let mut a = vec![0, 1, 8, 0, 6, 4, 0, *self.pick(&[1, 2, 3, 4])];
        let mac: [u8; 6] = self.rng.random();
        a.extend(mac);
        a.extend(self.ipv4_addr());
        a.extend([0u8; 6]);
        a.extend(self.ipv4_addr());
        a
    }

    /// A complete (untruncated) frame.
    pub fn frame(&mut self) -> Vec<u8> {
        match self.rng.random_range(0..22) {
            0..=7 => {
                let mut f = self.ethernet(0x0800);
                f.extend(self.ipv4());
                f
            }
            8..=10 => {
                let mut f = self.ethernet(0x86dd);
                f.extend(self.ipv6());
                f
            }
            11 | 12 => {
                let ty = if self.chance(0.7) { 0x0806 } else { 0x8035 };
                let mut f = self.ethernet(ty);
                f.extend(self.arp());
                f
            }
            13 | 14 => {
                // 802.1Q (or 802.1ad, QinQ), sometimes two tags: the IPv4
                // packet sits four or eight bytes further in. The ids are
                // those filters name, or random.
                let tpid = |g: &mut Self| *g.pick(&[0x8100u16, 0x8100, 0x88a8, 0x9100]);
                let first = tpid(self);
                let mut f = self.ethernet(first);
                // IPv4 inside mostly, IPv6 now and then.
                let inner = if self.chance(0.3) { 0x86dd } else { 0x0800 };
                for tag in 0..self.rng.random_range(1..=2) {
                    let id: u16 = if self.chance(0.5) {
                        *self.pick(&[1, 100, 4095, 0])
                    } else {
                        self.rng.random()
                    };
                    let next = if tag == 0 && self.chance(0.4) {
                        tpid(self)
                    } else {
                        inner
                    };
                    f.extend(id.to_be_bytes());
                    f.extend(next.to_be_bytes());
                    if next == inner {
                        break;
                    }
                }
                if inner == 0x86dd {
                    f.extend(self.ipv6());
                } else {
                    f.extend(self.ipv4());
                }
                f
            }
            15 => {
                // 802.3 with an LLC header: a length at 12, DSAP at 14.
                let body: Vec<u8> = (0..self.rng.random_range(3..60))
                    .map(|_| self.rng.random())
                    .collect();
                let mut f = self.ethernet(body.len() as u16);
                f.extend(body);
                f[14] = *self.pick(&[0x42, 0xaa, 0xe0, 0x06, 0xf0, 0xfe]);
                // Mostly SSAP = DSAP, as the ISO, IP and NetBEUI SAPs need.
                if self.chance(0.7) {
                    f[15] = f[14];
                }
                // Netware's raw 802.3 (DSAP and SSAP 0xff), which `llc`
                // excludes.
                if self.chance(0.1) {
                    f[14] = 0xff;
                    f[15] = 0xff;
                }
                // The control byte: an I frame, an S or U command (`llc
                // rr` ... `llc frmr`), the poll/final bit sometimes set,
                // or random.
                if self.chance(0.8) {
                    let c = *self.pick(&[
                        0x00u8, 0x02, 0x01, 0x05, 0x09, 0x03, 0x63, 0x43, 0x0f, 0x6f, 0xe3, 0xaf,
                        0x87, 0x0d,
                    ]);
                    let pf = if self.chance(0.3) { 0x10 } else { 0 };
                    f[16] = c | pf;
                }
                // 802.2 SNAP: the encapsulated-Ethernet or Apple OUI, and
                // IPX's, AppleTalk's, AARP's or IPv4's type.
                if f.len() >= 22 && self.chance(0.25) {
                    f[14..17].copy_from_slice(&[0xaa, 0xaa, 0x03]);
                    let oui = *self.pick(&[[0u8, 0, 0], [0x08, 0x00, 0x07]]);
                    f[17..20].copy_from_slice(&oui);
                    let ty = *self.pick(&[0x8137u16, 0x809b, 0x80f3, 0x0800]);
                    f[20..22].copy_from_slice(&ty.to_be_bytes());
                }
                // ISO's SAP: a network-layer protocol id after the LLC
                // header (CLNP, ES-IS, IS-IS or another), and for IS-IS a
                // PDU type in the header's fifth byte (one of ISO 10589's,
                // now and then with a reserved high bit set, or another).
                if f[14..16] == [0xfe, 0xfe] && f.len() > 17 && self.chance(0.8) {
                    f[17] = *self.pick(&[0x81, 0x82, 0x83, 0x83, 0x83, 0x00]);
                    if f[17] == 0x83 && f.len() > 21 {
                        let t = *self.pick(&[15u8, 16, 17, 18, 20, 24, 25, 26, 27, 19, 0]);
                        f[21] = if self.chance(0.1) { t | 0x20 } else { t };
                    }
                }
                f
            }
            20 | 21 => {
                // PPPoE discovery (0x8863) or session (0x8864): version
                // and type, code, session id, length, then a payload
                // (PPP's IPv4 protocol number and an IPv4 packet in a
                // session).
                let session = self.chance(0.6);
                let ty = if session { 0x8864 } else { 0x8863 };
                // Now and then behind an 802.1Q tag.
                let mut f = if self.chance(0.2) {
                    let mut f = self.ethernet(0x8100);
                    f.extend([0x00, *self.pick(&[100u8, 5])]);
                    f.extend(u16::to_be_bytes(ty));
                    f
                } else {
                    self.ethernet(ty)
                };
                let code = if session {
                    0
                } else {
                    *self.pick(&[0x09u8, 0x07, 0x19, 0x65, 0xa7])
                };
                let id: u16 = if self.chance(0.5) {
                    *self.pick(&[1, 27, 0x1234, 0xffff])
                } else {
                    self.rng.random()
                };
                f.extend([0x11, code]);
                f.extend(id.to_be_bytes());
                // A session's PPP frame: IPv4 (PPP protocol 0x21), IPv6
                // (0x57), MPLS (0x0281, one label, IPv4 below it) or
                // another protocol.
                let body = if session {
                    match self.rng.random_range(0..20) {
                        0..=11 => {
                            let mut b = vec![0x00, 0x21];
                            b.extend(self.ipv4());
                            b
                        }
                        12..=16 => {
                            let mut b = vec![0x00, 0x57];
                            b.extend(self.ipv6());
                            b
                        }
                        17 | 18 => {
                            let label: u32 = *self.pick(&[123, 100, 5]);
                            let mut b = vec![0x02, 0x81];
                            b.extend((label << 12 | 1 << 8 | 64).to_be_bytes());
                            b.extend(self.ipv4());
                            b
                        }
                        _ => {
                            let p = *self.pick(&[0x0023u16, 0x0031, 0x0027, 0xc021]);
                            let mut b = p.to_be_bytes().to_vec();
                            b.extend(
                                (0..self.rng.random_range(0..30)).map(|_| self.rng.random::<u8>()),
                            );
                            b
                        }
                    }
                } else {
                    (0..self.rng.random_range(0..30))
                        .map(|_| self.rng.random())
                        .collect()
                };
                f.extend((body.len() as u16).to_be_bytes());
                f.extend(body);
                f
            }
            18 => {
                let nodes = DECNET.map(|(area, node)| area << 10 | node);
                self.decnet(&nodes)
            }
            16 => {
                // Garbage behind a real Ethernet type (IPX's and
                // AppleTalk's among them).
                let ty = *self.pick(&[0x0800u16, 0x86dd, 0x0806, 0x8137, 0x809b, 0x80f3]);
                let mut f = self.ethernet(ty);
                f.extend((0..self.rng.random_range(0..80)).map(|_| self.rng.random::<u8>()));
                f
            }
            19 => {
                // MPLS (sometimes behind an 802.1Q tag): one or two
                // labels, the bottom one's stack bit set (but now and
                // then on none), then IPv4, IPv6 or garbage. The labels
                // are those filters name, or random.
                let mut f = if self.chance(0.2) {
                    let mut f = self.ethernet(0x8100);
                    f.extend([0x00, 0x05, 0x88, 0x47]);
                    f
                } else {
                    self.ethernet(0x8847)
                };
                let n = self.rng.random_range(1..=2);
                let bottom = self.chance(0.9);
                for i in 0..n {
                    let label: u32 = if self.chance(0.6) {
                        *self.pick(&[100, 200, 5, 0])
                    } else {
                        self.rng.random_range(0..1 << 20)
                    };
                    let tc: u32 = self.rng.random_range(0..8);
                    let s = u32::from(bottom && i == n - 1);
                    let ttl: u32 = self.rng.random_range(0..256);
                    f.extend((label << 12 | tc << 9 | s << 8 | ttl).to_be_bytes());
                }
                match self.rng.random_range(0..20) {
                    0..=11 => f.extend(self.ipv4()),
                    12..=18 => f.extend(self.ipv6()),
                    _ => {
                        f.extend((0..self.rng.random_range(0..40)).map(|_| self.rng.random::<u8>()))
                    }
                }
                f
            }
            _ => (0..self.rng.random_range(0..120))
                .map(|_| self.rng.random())
                .collect(),
        }
    }

    /// A DECnet Phase IV frame: a length, now and then a pad byte (0x81),
    /// then the routing header's flags (a short header, 2, or a long one,
    /// 6, with random high bits, or a random byte) and the destination and
    /// source nodes, little-endian (at 1 and 3 in a short header, 7 and 15
    /// in a long one), of `nodes` (`area << 10 | node`) or random.
    pub fn decnet(&mut self, nodes: &[u16]) -> Vec<u8> {
        let mut f = self.ethernet(0x6003);
        f.extend(self.rng.random::<u16>().to_le_bytes());
        if self.chance(0.4) {
            f.push(if self.chance(0.9) { 0x81 } else { 0x82 });
        }
        let long = self.chance(0.5);
        let flags = match self.rng.random_range(0..10) {
            0 => self.rng.random(),
            k => {
                (if long { 6 } else { 2 })
                    | if k < 4 {
                        self.rng.random::<u8>() & 0xf8
                    } else {
                        0
                    }
            }
        };
        let mut header: Vec<u8> = (0..21).map(|_| self.rng.random()).collect();
        header[0] = flags;
        let (dst, src) = if long { (7, 15) } else { (1, 3) };
        for at in [dst, src] {
            let node = if !nodes.is_empty() && self.chance(0.7) {
                *self.pick(nodes)
            } else {
                self.rng.random()
            };
            header[at..at + 2].copy_from_slice(&node.to_le_bytes());
        }
        f.extend(header);
        f
    }

    /// A filter of the shape endpoints install: one service on one host.
    pub fn service(&mut self) -> String {
        let port = if self.rng.random_bool(0.5) {
            PORTS[self.rng.random_range(0..PORTS.len())]
        } else {
            self.rng.random_range(1000..1400)
        };
        let h = HOSTS[self.rng.random_range(0..HOSTS.len())];
        let host = format!("{}.{}.{}.{}", h[0], h[1], h[2], h[3]);
        match self.rng.random_range(0..4) {
            0 => format!("tcp dst port {port} and dst host {host}"),
            1 => format!("udp dst port {port}"),
            2 => format!("ip dst host {host} and tcp port {port}"),
            _ => format!("tcp and dst port {port}"),
        }
    }

    /// A frame, truncated at an interesting length a third of the time.
    pub fn packet(&mut self) -> Vec<u8> {
        let mut f = self.frame();
        if self.chance(0.35) {
            let ihl_end = 14 + 4 * usize::from(f.get(14).map_or(5, |b| b & 0xf));
            let cut = match self.rng.random_range(0..6) {
                0 => self.rng.random_range(0..14),
                1 => self.rng.random_range(14..=24),
                2 => self.rng.random_range(24..=42),
                3 => ihl_end.saturating_sub(2) + self.rng.random_range(0..8),
                4 => ihl_end + self.rng.random_range(0..24),
                _ => self.rng.random_range(0..=f.len()),
            };
            f.truncate(cut);
        }
        f
    }
}

impl Gen {
    /// `inner` (an Ethernet frame) carried in a Geneve frame as libpcap's
    /// `geneve` reads one: IPv4 (IHL 5 to 15) or IPv6, UDP to port 6081
    /// (now and then another), a Geneve header with version 0 (now and
    /// then not), 0 to 63 words of options, the VNI `vni`, and the inner
    /// frame whole (protocol 0x6558) or without its Ethernet header (the
    /// protocol its EtherType).
    pub fn geneve(&mut self, inner: &[u8], vni: u32) -> Vec<u8> {
        let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2];
        let teb = inner.len() < 14 || self.chance(0.6);
        let (proto, payload) = if teb {
            (0x6558, inner)
        } else {
            (u16::from_be_bytes([inner[12], inner[13]]), &inner[14..])
        };
        let words: u8 = if self.chance(0.5) {
            0
        } else {
            self.rng.random_range(0..64)
        };
        let first = words | if self.chance(0.1) { 0x40 } else { 0 };
        let port: u16 = if self.chance(0.1) { 6082 } else { 6081 };
        let udp_len = (16 + 4 * usize::from(words) + payload.len()) as u16;
        let fill: u8 = self.rng.random();
        if self.chance(0.7) {
            let ihl: u8 = if self.chance(0.7) {
                5
            } else {
                self.rng.random_range(5..=15)
            };
            f.extend([0x08, 0x00, 0x40 | ihl, 0]);
            f.extend((u16::from(ihl) * 4 + udp_len).to_be_bytes());
            f.extend([0, 1, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
            f.extend(std::iter::repeat_n(fill, usize::from(ihl - 5) * 4));
        } else {
            f.extend([0x86, 0xdd, 0x60, 0, 0, 0]);
            f.extend(udp_len.to_be_bytes());
            f.extend([17, 64]);
            f.extend([0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
            f.extend([0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        }
        f.extend([0x9c, 0x40]);
        f.extend(port.to_be_bytes());
        f.extend(udp_len.to_be_bytes());
        f.extend([0, 0, first, 0]);
        f.extend(proto.to_be_bytes());
        f.extend(((vni & 0xff_ffff) << 8).to_be_bytes());
        f.extend(std::iter::repeat_n(fill, 4 * usize::from(words)));
        f.extend(payload);
        f
    }
}

/// Lowercase hex of a packet, for failure messages.
pub fn hex(pkt: &[u8]) -> String {
    pkt.iter().map(|b| format!("{b:02x}")).collect()
}

// ------------------------------------------------- one filter, every verdict

/// A table in the tests' shared code cache, under a key of its own.
pub fn new_table() -> Table {
    static CACHE: OnceLock<Arc<CodeCache>> = OnceLock::new();
    static KEY: AtomicU64 = AtomicU64::new(1);
    let cache = CACHE.get_or_init(|| Arc::new(CodeCache::new(Config::default())));
    Table::with_cache(Arc::clone(cache), KEY.fetch_add(1, Ordering::Relaxed))
}

/// Whether bpf(2) can load and test-run XDP programs here; the reason
/// is printed once when not, and `UNET_REQUIRE_XDP=1` makes it a failure.
pub fn xdp_usable() -> bool {
    static USABLE: OnceLock<bool> = OnceLock::new();
    *USABLE.get_or_init(|| match ebpf::probe() {
        Ok(()) => true,
        Err(why) if std::env::var("UNET_REQUIRE_XDP").as_deref() == Ok("1") => {
            panic!("UNET_REQUIRE_XDP=1 but bpf(2) is unusable: {why}")
        }
        Err(why) => {
            eprintln!("the eBPF verdicts are skipped: {why}");
            false
        }
    })
}

/// One expression as dpf compiles it, with every path that gives a verdict.
pub struct Compiled {
    pub program: Program,
    pub table: Table,
    pub reader: RefCell<Reader>,
    /// The table lowered to XDP, where bpf(2) is usable and it was asked
    /// for: accepted frames return `XDP_TX`.
    pub xdp: Option<XdpProgram>,
}

/// `filter` compiled, in a one-filter table of its own, and lowered to
/// XDP as well when `with_xdp` and bpf(2) is usable.
pub fn dpf_compile(filter: &str, with_xdp: bool) -> Result<Compiled, dpf::Error> {
    let program = dpf::compile(filter)?;
    let mut table = new_table();
    table.install(filter, 1, 0)?;
    let reader = RefCell::new(table.reader());
    let xdp = (with_xdp && xdp_usable()).then(|| {
        XdpProgram::load(
            table.classifier().merged(),
            &OnAccept::Return(ebpf::xdp::TX),
        )
        .unwrap_or_else(|e| panic!("«{filter}»: the kernel refused even the fallback: {e}"))
    });
    Ok(Compiled {
        program,
        table,
        reader,
        xdp,
    })
}

/// Every verdict dpf gives for one (filter, frame) pair, by name: the
/// lowered program, the merged structure, the native classifier and, on
/// frames XDP can carry, the XDP program in the kernel.
pub fn dpf_verdicts(c: &Compiled, pkt: &[u8]) -> Vec<(&'static str, bool)> {
    let mut v = vec![
        ("reference", c.program.matches(pkt)),
        (
            "merged",
            c.table.classifier().classify_reference(pkt) == Some(1),
        ),
        ("native", c.reader.borrow_mut().classify(pkt) == Some(1)),
    ];
    if let Some(x) = c.xdp.as_ref().filter(|_| pkt.len() >= 14) {
        let out = x
            .program()
            .test_run(&ebpf::TestRun::new(pkt))
            .unwrap_or_else(|e| panic!("BPF_PROG_TEST_RUN on {}: {e}", hex(pkt)));
        v.push(("eBPF", out.verdict == ebpf::xdp::TX));
    }
    v
}
