//! The filter language: a subset of pcap-filter(7), lexed and parsed into
//! an [`Expr`].
//!
//! The grammar (EBNF in `docs/dpf.md`) follows libpcap's `grammar.y`:
//! `not` binds tightest, `and` and `or` have *equal* precedence and
//! associate to the left (`a or b and c` is `(a or b) and c`), and a bare
//! value after `and`/`or` (or `not`, or inside parentheses) takes the
//! qualifiers of the primitive before it, as libpcap's inherited
//! qualifiers do: `host 10.0.0.1 or 10.0.0.2` is
//! `host 10.0.0.1 or host 10.0.0.2`, and `tcp port 80 or 443` is
//! `tcp port 80 or tcp port 443`. A protocol name or a comparison leaves
//! no qualifier to inherit, so `tcp or 80` is an error, as in libpcap.
//!
//! Comparisons are libpcap's `arth relop arth`: arithmetic on both sides
//! with its precedences, `len`, packet loads at computed offsets and its
//! named values (`tcpflags`, `tcp-syn`, `icmp-echo`, ...); a packet field
//! at a written offset compared with a written number stays a
//! [`Compare`], anything else is a [`Relation`].
//!
//! Numbers are decimal, hexadecimal (`0x`) or octal (a leading `0`), and
//! must fit in 32 bits. Addresses are IPv4 dotted quads (or fewer parts
//! for a network), IPv6 addresses in RFC 4291's text forms (`::`, a
//! trailing dotted quad), MAC addresses in libpcap's spellings and DECnet
//! addresses (`AREA.NODE`, after `decnet`). Names
//! of hosts, networks, ports and protocols are not resolved; only the
//! escaped protocol names after `ip proto` and `ether proto` (`\tcp`,
//! `\ip`, ...) are known. Every error carries the 1-based column of the
//! offending token.

use std::fmt;

use crate::error::Error;
use crate::ir::Size;

/// A filter expression.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Expr {
    /// Both hold (evaluated left to right, short-circuit).
    And(Box<Expr>, Box<Expr>),
    /// Either holds (evaluated left to right, short-circuit).
    Or(Box<Expr>, Box<Expr>),
    /// The operand does not hold.
    Not(Box<Expr>),
    /// One primitive.
    Prim(Primitive),
}

/// A protocol keyword, used as a primitive (`tcp`), as a qualifier
/// (`ip host`, `udp port`) and as the layer of a comparison (`tcp[13]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Proto {
    /// `ether`: the Ethernet header (only as a qualifier or a layer).
    Ether,
    /// `ip`: IPv4.
    Ip,
    /// `ip6`: IPv6.
    Ip6,
    /// `arp`.
    Arp,
    /// `rarp`.
    Rarp,
    /// `tcp`, over IPv4 or IPv6.
    Tcp,
    /// `udp`, over IPv4 or IPv6.
    Udp,
    /// `icmp` (IPv4 only).
    Icmp,
    /// `sctp`, over IPv4 or IPv6.
    Sctp,
    /// `vrrp`, only as the layer of a comparison (`vrrp[0]`): IPv4
    /// protocol 112.
    Vrrp,
    /// `carp`, only as the layer of a comparison: IPv4 protocol 112, as
    /// `vrrp`.
    Carp,
    /// `icmp6`, only as the layer of a comparison (`icmp6[0]`): IPv6 with
    /// next header 58, the ICMPv6 header at the fixed offset 40.
    Icmp6,
}

/// The IS-IS PDU type sets libpcap names (`l1`, `l2`, `iih`, `lsp`,
/// `snp`, `csnp`, `psnp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IsisPdus {
    /// `l1`: every level-1 PDU, and the point-to-point hello.
    L1,
    /// `l2`: every level-2 PDU, and the point-to-point hello.
    L2,
    /// `iih`: the hellos.
    Iih,
    /// `lsp`: the link-state PDUs.
    Lsp,
    /// `snp`: the sequence-number PDUs, complete and partial.
    Snp,
    /// `csnp`: the complete sequence-number PDUs.
    Csnp,
    /// `psnp`: the partial sequence-number PDUs.
    Psnp,
}

impl IsisPdus {
    const ALL: [IsisPdus; 7] = [
        IsisPdus::L1,
        IsisPdus::L2,
        IsisPdus::Iih,
        IsisPdus::Lsp,
        IsisPdus::Snp,
        IsisPdus::Csnp,
        IsisPdus::Psnp,
    ];

    /// The set a name stands for.
    pub fn from_name(name: &str) -> Option<Self> {
        IsisPdus::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The name.
    pub fn name(self) -> &'static str {
        match self {
            IsisPdus::L1 => "l1",
            IsisPdus::L2 => "l2",
            IsisPdus::Iih => "iih",
            IsisPdus::Lsp => "lsp",
            IsisPdus::Snp => "snp",
            IsisPdus::Csnp => "csnp",
            IsisPdus::Psnp => "psnp",
        }
    }

    /// The PDU types, in the order libpcap tests them: it builds each set
    /// as `t1 or t2`, then puts each further type in front (`gen_or(b0,
    /// b1)` tests `b0` first).
    pub fn types(self) -> &'static [u32] {
        // ISO 10589's numbers: L1/L2 LAN hellos 15/16, point-to-point
        // hello 17, L1/L2 LSPs 18/20, CSNPs 24/25, PSNPs 26/27.
        match self {
            IsisPdus::L1 => &[26, 24, 18, 15, 17],
            IsisPdus::L2 => &[27, 25, 20, 16, 17],
            IsisPdus::Iih => &[17, 15, 16],
            IsisPdus::Lsp => &[18, 20],
            IsisPdus::Snp => &[27, 26, 24, 25],
            IsisPdus::Csnp => &[24, 25],
            IsisPdus::Psnp => &[26, 27],
        }
    }
}

/// A direction qualifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dir {
    /// `src or dst`, also the default when no direction is written.
    SrcOrDst,
    /// `src`.
    Src,
    /// `dst`.
    Dst,
    /// `src and dst`.
    SrcAndDst,
}

/// A relational operator of a comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RelOp {
    /// `=` or `==`.
    Eq,
    /// `!=`.
    Ne,
    /// `<`.
    Lt,
    /// `<=`.
    Le,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
}

/// A comparison of a packet field with a constant:
/// `layer[offset:size] & mask op value`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Compare {
    /// The header the offset counts from: `ether`, `ip`, `ip6`, `arp`,
    /// `rarp`, `tcp`, `udp`, `icmp` or `sctp`.
    pub layer: Proto,
    /// The byte offset from the start of that header.
    pub offset: u32,
    /// The width of the field (`:1`, `:2`, `:4`; one byte by default).
    pub size: Size,
    /// The mask written after `&`, if any.
    pub mask: Option<u32>,
    /// The operator.
    pub op: RelOp,
    /// The constant on the right.
    pub value: u32,
}

/// A binary arithmetic operator of a comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArithOp {
    /// `+`.
    Add,
    /// `-`.
    Sub,
    /// `*`.
    Mul,
    /// `/`.
    Div,
    /// `%`.
    Mod,
    /// `&`.
    And,
    /// `|`.
    Or,
    /// `^`.
    Xor,
    /// `<<`.
    Shl,
    /// `>>`.
    Shr,
}

/// One step of an arithmetic expression, in postfix order (an operand's
/// steps come before its operator's, the left operand's before the
/// right's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arith {
    /// A number (named values such as `tcp-syn` and `icmptype` are
    /// numbers too).
    Num(u32),
    /// `len`: the length of the frame.
    Len,
    /// `layer[index:size]`: takes the index computed before it.
    Load(Proto, Size),
    /// A binary operator, on the two operands before it.
    Bin(ArithOp),
    /// Unary minus.
    Neg,
}

/// A comparison of two arithmetic expressions, `lhs op rhs` (libpcap's
/// `arth relop arth`), other than the plain field comparisons that
/// [`Compare`] holds, as written (lowering folds constants as libpcap's
/// optimizer does).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Relation {
    /// The left side, in postfix order.
    pub lhs: Vec<Arith>,
    /// The operator.
    pub op: RelOp,
    /// The right side, in postfix order.
    pub rhs: Vec<Arith>,
    /// The column the comparison starts at: lowering refuses it there if
    /// libpcap's optimizer would (a divisor its constant folding finds
    /// zero, a shift count above 31, in a comparison it still reaches).
    pub column: usize,
}

impl Relation {
    /// Whether a packet load of either side reads a layer `layer` holds.
    pub(crate) fn loads_from(&self, layer: impl Fn(Proto) -> bool) -> bool {
        self.lhs
            .iter()
            .chain(&self.rhs)
            .any(|a| matches!(*a, Arith::Load(l, _) if layer(l)))
    }
}

/// One primitive of the language.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Primitive {
    /// A protocol name alone: `ip`, `ip6`, `arp`, `rarp`, `tcp`, `udp`,
    /// `icmp`, `sctp`.
    Proto(Proto),
    /// `ether proto N` (also `\ip`, `\ip6`, `\arp`, `\rarp` and the other
    /// names of libpcap's EtherType and LLC SAP tables), and the
    /// abbreviations that are one (`decnet`, `atalk`, `iso`, `ipx`...).
    /// As libpcap's gen_ether_linktype: above 1500 an EtherType, at most
    /// 255 an LLC DSAP (DSAP and SSAP for ISO, IP and NetBEUI); IPX (0xe0)
    /// is its EtherType 0x8137 or, in 802.3, its DSAP, Netware's raw
    /// 0xffff or 802.2 SNAP of 0x8137; AppleTalk (0x809b) and AARP
    /// (0x80f3) are the EtherType or 802.2 SNAP with Apple's or the zero
    /// OUI.
    EtherProto(u32),
    /// `ip proto N` (also `\tcp`, `\udp`, `\icmp`, `\sctp`).
    IpProto(u32),
    /// `ip6 proto N`: IPv6 with next header N, directly or behind a
    /// fragment header (libpcap's `gen_proto` for `Q_IPV6`); `icmp6` is
    /// `ip6 proto 58`.
    Ip6Proto(u32),
    /// `proto N` without a qualifier: `ip proto N or ip6 proto N`.
    AnyProto(u32),
    /// `[ether] broadcast`: the destination MAC is ff:ff:ff:ff:ff:ff.
    Broadcast,
    /// `[ether] multicast`: the destination MAC's group bit is set.
    Multicast,
    /// `ip multicast`: IPv4 whose destination's first byte is at least
    /// 224 (libpcap's `gen_multicast` for `ip`: 224.0.0.0/4 and the
    /// reserved 240.0.0.0/4 above it).
    IpMulticast,
    /// `ip6 multicast`: IPv6 whose destination's first byte is 0xff.
    Ip6Multicast,
    /// `ether [dir] [host] MAC`: the source or destination MAC address
    /// (libpcap's `gen_ehostop`, six bytes compared).
    EtherHost {
        /// The direction.
        dir: Dir,
        /// The address.
        addr: [u8; 6],
    },
    /// `[ip|arp|rarp] [dir] host A.B.C.D`.
    Host {
        /// The protocol qualifier; `None` means IPv4, ARP and RARP.
        proto: Option<Proto>,
        /// The direction.
        dir: Dir,
        /// The address.
        addr: u32,
    },
    /// `[ip|arp|rarp] [dir] net A.B.C.D/len` (or `mask M`, or a net
    /// written with fewer than four parts).
    Net {
        /// The protocol qualifier; `None` means IPv4, ARP and RARP.
        proto: Option<Proto>,
        /// The direction.
        dir: Dir,
        /// The network address (no bits outside `mask`).
        addr: u32,
        /// The netmask.
        mask: u32,
    },
    /// `decnet [dir] [host] AREA.NODE`: a DECnet Phase IV routing
    /// header's source or destination
    /// node (libpcap's `gen_dnhostop`), in any of its four layouts (long
    /// or short header, with or without a pad byte).
    DecnetHost {
        /// The direction.
        dir: Dir,
        /// The address, `area << 10 | node`.
        addr: u16,
    },
    /// `[ip6] [dir] host ADDR` with an IPv6 address (libpcap's
    /// `gen_host6`): IPv6 only, with or without the `ip6` qualifier.
    Host6 {
        /// The direction.
        dir: Dir,
        /// The address.
        addr: [u8; 16],
    },
    /// `[ip6] [dir] net ADDR[/len]` with an IPv6 address, `/128` if no
    /// length is written.
    Net6 {
        /// The direction.
        dir: Dir,
        /// The network address (no bits past the prefix).
        addr: [u8; 16],
        /// The prefix length, at most 128.
        len: u8,
    },
    /// `[tcp|udp|sctp] [dir] port N` or `portrange N-M`.
    Port {
        /// The protocol qualifier; `None` means SCTP, TCP and UDP.
        proto: Option<Proto>,
        /// The direction.
        dir: Dir,
        /// The lowest port.
        first: u16,
        /// The highest port (equal to `first` for `port`).
        last: u16,
        /// Written as `portrange`.
        range: bool,
    },
    /// A comparison of a packet field with a constant.
    Compare(Compare),
    /// Any other comparison (`len >= 100`, `ip[2:2] - ((ip[0] & 0xf) <<
    /// 2) > 40`), `less N` (`len <= N`) and `greater N` (`len >= N`).
    Relation(Box<Relation>),
    /// `pppoes [id]`: a PPPoE session frame (EtherType 0x8864), with
    /// session id `id` if one is given. What follows it is read in its PPP
    /// frame (libpcap's gen_pppoes makes the link layer PPP, its type the
    /// PPP protocol after the 6-byte PPPoE header, its payload after
    /// that): see [`Primitive::Shifted`]'s `ppp`.
    Pppoes {
        /// The session id (16 bits).
        id: Option<u16>,
    },
    /// A primitive after `shift` `vlan` primitives and `labels` `mpls`
    /// primitives: libpcap reads its link-layer payload `4 * (shift +
    /// labels)` bytes further on (not its MAC addresses, nor
    /// `ether[...]`), its link-layer type `4 * shift` bytes further on, and
    /// after an `mpls` a type as the bottom label's stack bit and the IP
    /// version (only IPv4 and IPv6 can be told). Printed as the primitive
    /// alone.
    ///
    /// After a `pppoes`, whose 8 bytes (the PPPoE header and the PPP
    /// protocol) move the type and payload as two tags would, `shift`
    /// counts them, and `ppp` says the link-layer type is PPP's protocol
    /// field: an EtherType test is of the PPP protocol libpcap maps it to
    /// (`ethertype_to_ppptype`: IPv4 0x21, IPv6 0x57, ...), one compare.
    Shifted {
        /// The `vlan` primitives before it, and two for a `pppoes`.
        shift: u32,
        /// The `mpls` primitives before it (after any `pppoes`).
        labels: u32,
        /// After a `pppoes`: the link layer is PPP.
        ppp: bool,
        /// The primitive.
        inner: Box<Primitive>,
    },
    /// `llc [kind]`: an 802.3 frame (a length, not a type, at 12) whose
    /// DSAP and SSAP are not both 0xff (Netware's raw 802.3), with an LLC
    /// control byte of the given kind if one is named (libpcap's
    /// `gen_llc`, `gen_llc_i/s/u` and `gen_llc_s/u_subtype`).
    Llc(Option<LlcKind>),
    /// `iso proto N` (also `\clnp`, `\esis`, `\isis`), and `clnp`,
    /// `esis` (`es-is`), `isis` (`is-is`) alone (libpcap's `gen_proto` for
    /// `Q_ISO`): an 802.3 frame with the ISO network-layer SAP (DSAP and
    /// SSAP 0xfe) whose network-layer protocol id, the byte after the LLC
    /// header, is N.
    IsoProto(u32),
    /// `isis proto N` (libpcap's `gen_proto` for `Q_ISIS`): IS-IS (ISO
    /// protocol 0x83) with PDU type N, the IS-IS header's fifth byte.
    IsisProto(u32),
    /// `l1`, `l2`, `iih`, `lsp`, `snp`, `csnp`, `psnp`: IS-IS of any of
    /// the PDU types the name stands for (libpcap's
    /// `gen_proto_abbrev_internal`).
    IsisPdus(IsisPdus),
    /// `mpls [label]` (libpcap's `gen_mpls`): the first an MPLS frame
    /// (EtherType 0x8847, `4 * shift` bytes on), each later one a label
    /// below one that is not the bottom of the stack; with the label's 20
    /// bits if one is given.
    Mpls {
        /// The `vlan` primitives before it, and two for a `pppoes`.
        shift: u32,
        /// After a `pppoes`: the first label's type is PPP's
        /// (`PPP_MPLS_UCAST`, 0x0281).
        ppp: bool,
        /// The `mpls` primitives before this one.
        depth: u32,
        /// The label (20 bits).
        label: Option<u32>,
    },
    /// `vlan [id]`: an 802.1Q, 802.1ad or QinQ tag `4 * shift` bytes
    /// into the frame (after `shift` earlier `vlan` primitives), with VLAN
    /// id `id` if one is given.
    Vlan {
        /// The `vlan` primitives before this one.
        shift: u32,
        /// The VLAN id (12 bits).
        id: Option<u16>,
    },
    /// `geneve [vni]` (libpcap 1.10's `gen_geneve`): IPv4 or IPv6, UDP to
    /// port 6081, a Geneve header of version 0, with the 24-bit VNI if
    /// one is given. Everything after it in the text is read in the
    /// encapsulated packet ([`Primitive::InGeneve`]).
    Geneve {
        /// The VNI (24 bits).
        vni: Option<u32>,
        /// Where the outer IP header is.
        outer: Outer,
        /// The column of the keyword.
        column: usize,
    },
    /// A primitive after `geneve`, read in the encapsulated packet: its
    /// link-layer type, payload and header are where the Geneve header
    /// says (libpcap 1.10's `gen_geneve_offsets`); any `vlan` after the
    /// `geneve` moves them on as on the outer frame (`inner` is then
    /// [`Primitive::Shifted`] or [`Primitive::Vlan`], counting those tags
    /// alone). Printed as the primitive alone.
    InGeneve {
        /// Where the outer IP header of the `geneve` before it is.
        outer: Outer,
        /// The primitive.
        inner: Box<Primitive>,
    },
}

/// Where a `geneve` primitive reads its outer IPv4 or IPv6 header: after
/// the `vlan`s before it (`shift`, two more for a `pppoes`), in a PPPoE
/// session's PPP frame if `ppp`. (dpf refuses a `geneve` after `mpls`.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Outer {
    /// The `vlan` primitives before the `geneve`, and two for a `pppoes`.
    pub shift: u32,
    /// After a `pppoes`.
    pub ppp: bool,
}

/// The LLC frame kinds `llc` names: the three formats (information,
/// supervisory, unnumbered) and the commands of the last two, as libpcap
/// 1.10 spells them (`llc_s_subtypes`, `llc_u_subtypes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LlcKind {
    /// `i`: an information frame (control bit 0 clear).
    I,
    /// `s`: a supervisory frame (control bits 1..0 = 01).
    S,
    /// `u`: an unnumbered frame (control bits 1..0 = 11).
    U,
    /// `rr`: receive ready.
    Rr,
    /// `rnr`: receive not ready.
    Rnr,
    /// `rej`: reject.
    Rej,
    /// `ui`: unnumbered information.
    Ui,
    /// `ua`: unnumbered acknowledgement.
    Ua,
    /// `disc`: disconnect.
    Disc,
    /// `dm`: disconnected mode.
    Dm,
    /// `sabme`: set asynchronous balanced mode extended.
    Sabme,
    /// `test`: test.
    Test,
    /// `xid`: exchange identification.
    Xid,
    /// `frmr`: frame reject.
    Frmr,
}

impl LlcKind {
    const ALL: [LlcKind; 14] = [
        LlcKind::I,
        LlcKind::S,
        LlcKind::U,
        LlcKind::Rr,
        LlcKind::Rnr,
        LlcKind::Rej,
        LlcKind::Ui,
        LlcKind::Ua,
        LlcKind::Disc,
        LlcKind::Dm,
        LlcKind::Sabme,
        LlcKind::Test,
        LlcKind::Xid,
        LlcKind::Frmr,
    ];

    /// The name as written after `llc`.
    pub fn name(self) -> &'static str {
        match self {
            LlcKind::I => "i",
            LlcKind::S => "s",
            LlcKind::U => "u",
            LlcKind::Rr => "rr",
            LlcKind::Rnr => "rnr",
            LlcKind::Rej => "rej",
            LlcKind::Ui => "ui",
            LlcKind::Ua => "ua",
            LlcKind::Disc => "disc",
            LlcKind::Dm => "dm",
            LlcKind::Sabme => "sabme",
            LlcKind::Test => "test",
            LlcKind::Xid => "xid",
            LlcKind::Frmr => "frmr",
        }
    }

    /// The kind a name stands for; libpcap compares the name ignoring
    /// case.
    pub fn from_name(name: &str) -> Option<LlcKind> {
        LlcKind::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(name))
    }

    /// The test on the control byte (the third LLC byte) as `(mask,
    /// value)`: `control & mask == value`. Supervisory commands are
    /// compared under 0x0f and unnumbered ones under 0xef (the poll/final
    /// bit ignored), as libpcap does.
    pub fn control(self) -> (u8, u8) {
        match self {
            LlcKind::I => (0x01, 0x00),
            LlcKind::S => (0x03, 0x01),
            LlcKind::U => (0x03, 0x03),
            LlcKind::Rr => (0x0f, 0x01),
            LlcKind::Rnr => (0x0f, 0x05),
            LlcKind::Rej => (0x0f, 0x09),
            LlcKind::Ui => (0xef, 0x03),
            LlcKind::Ua => (0xef, 0x63),
            LlcKind::Disc => (0xef, 0x43),
            LlcKind::Dm => (0xef, 0x0f),
            LlcKind::Sabme => (0xef, 0x6f),
            LlcKind::Test => (0xef, 0xe3),
            LlcKind::Xid => (0xef, 0xaf),
            LlcKind::Frmr => (0xef, 0x87),
        }
    }
}

// ---------------------------------------------------------------- lexer

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    /// A keyword or a name.
    Word(String),
    /// `\name`.
    Escaped(String),
    /// A number, with its text.
    Num(u32, String),
    /// A dotted address (one to four decimal parts, each fitting in 32
    /// bits), with its text.
    Addr(Vec<u32>, String),
    /// A MAC address, with its text.
    Mac([u8; 6], String),
    /// An IPv6 address, with its text.
    Addr6([u8; 16], String),
    LParen,
    RParen,
    LBrack,
    RBrack,
    Colon,
    Slash,
    Minus,
    Amp,
    AndOp,
    OrOp,
    NotOp,
    Rel(RelOp),
    /// An arithmetic operator pcap has and this subset does not.
    Arith(&'static str),
    End,
}

impl Tok {
    fn describe(&self) -> String {
        match self {
            Tok::Word(w) => format!("{w:?}"),
            Tok::Escaped(w) => format!("\"\\{w}\""),
            Tok::Num(_, t) | Tok::Addr(_, t) | Tok::Mac(_, t) | Tok::Addr6(_, t) => {
                format!("{t:?}")
            }
            Tok::LParen => "\"(\"".into(),
            Tok::RParen => "\")\"".into(),
            Tok::LBrack => "\"[\"".into(),
            Tok::RBrack => "\"]\"".into(),
            Tok::Colon => "\":\"".into(),
            Tok::Slash => "\"/\"".into(),
            Tok::Minus => "\"-\"".into(),
            Tok::Amp => "\"&\"".into(),
            Tok::AndOp => "\"&&\"".into(),
            Tok::OrOp => "\"||\"".into(),
            Tok::NotOp => "\"!\"".into(),
            Tok::Rel(op) => format!("\"{op}\""),
            Tok::Arith(s) => format!("\"{s}\""),
            Tok::End => "end of input".into(),
        }
    }
}

fn parse_number(text: &str, column: usize) -> Result<u32, Error> {
    let bad = |reason| Error::BadNumber {
        column,
        text: text.to_string(),
        reason,
    };
    let (digits, radix) = if let Some(h) = text.strip_prefix("0x").or(text.strip_prefix("0X")) {
        (h, 16)
    } else if text.len() > 1 && text.starts_with('0') {
        (&text[1..], 8)
    } else {
        (text, 10)
    };
    if digits.is_empty() {
        return Err(bad("no digits"));
    }
    let mut v: u64 = 0;
    for c in digits.chars() {
        let d = c.to_digit(radix).ok_or(bad(match radix {
            8 if c.is_ascii_digit() => "a leading 0 makes it octal, and it has a non-octal digit",
            _ => "not a number",
        }))?;
        v = v * u64::from(radix) + u64::from(d);
        if v > u64::from(u32::MAX) {
            return Err(bad("overflows 32 bits"));
        }
    }
    Ok(v as u32)
}

/// A MAC address as libpcap's scanner reads one: six groups of one or
/// two hex digits separated by `:`, `-` or `.` (one kind), three groups
/// of four separated by `.`, or twelve hex digits in a row.
fn mac(text: &str) -> Option<[u8; 6]> {
    let hex = |g: &str, widths: &[usize]| {
        widths.contains(&g.len()) && g.chars().all(|c| c.is_ascii_hexdigit())
    };
    let digits: String = match [':', '-', '.'].iter().find(|&&sep| text.contains(sep)) {
        Some(&sep) => {
            let groups: Vec<&str> = text.split(sep).collect();
            if groups.len() == 6 && groups.iter().all(|g| hex(g, &[1, 2])) {
                groups.iter().map(|g| format!("{g:0>2}")).collect()
            } else if sep == '.' && groups.len() == 3 && groups.iter().all(|g| hex(g, &[4])) {
                groups.concat()
            } else {
                return None;
            }
        }
        None if hex(text, &[12]) => text.to_string(),
        None => return None,
    };
    let mut m = [0u8; 6];
    for (i, b) in m.iter_mut().enumerate() {
        *b = u8::from_str_radix(digits.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(m)
}

/// An IPv6 address as libpcap's scanner takes one (its `V6` patterns,
/// then `inet_pton`): groups of one to four hex digits separated by `:`,
/// one `::` at most standing for the groups left out, the last 32 bits
/// possibly a dotted quad. Text with no `:` is not one, so that a plain
/// number or an IPv4 address never reads as one.
fn ipv6(text: &str) -> Option<[u8; 16]> {
    if !text.contains(':') {
        return None;
    }
    text.parse::<std::net::Ipv6Addr>().ok().map(|a| a.octets())
}

/// The mask of an IPv6 prefix of `len` bits, as a number: what
/// [`Primitive::Net6`]'s address is compared under. A length past 128
/// (which the parser refuses) is the whole address.
///
/// ```
/// assert_eq!(dpf::syntax::mask6(0), 0);
/// assert_eq!(dpf::syntax::mask6(1), 1 << 127);
/// assert_eq!(dpf::syntax::mask6(128), u128::MAX);
/// assert_eq!(dpf::syntax::mask6(200), u128::MAX);
/// ```
pub fn mask6(len: u8) -> u128 {
    u128::MAX
        .checked_shl(128u32.saturating_sub(u32::from(len)))
        .unwrap_or(0)
}

/// The longest text [`mac`] reads: six groups of two digits and five
/// separators.
const MAC_TEXT_MAX: usize = 17;

/// The longest text [`ipv6`] reads: six groups of four digits, their six
/// colons and a dotted quad of 15.
const IPV6_TEXT_MAX: usize = 45;

fn lex(src: &str) -> Result<(Vec<(Tok, usize)>, usize), Error> {
    let chars: Vec<char> = src.chars().collect();
    let mut toks = Vec::new();
    let mut i = 0;
    let word_char = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.';
    while i < chars.len() {
        let c = chars[i];
        let column = i + 1;
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let two = |d: char| chars.get(i + 1) == Some(&d);
        // The text of the longest run from `i` of characters `keep` takes,
        // and where it ends, if it is at most `max` long: a longer run is
        // no address of the kind asked for, and is not read to its end,
        // so that a run of tens of thousands of `1:` (each `1` a start
        // again) costs a bounded look at each start, not the rest of the
        // run.
        let run = |keep: &dyn Fn(char) -> bool, max: usize| {
            let n = chars[i..]
                .iter()
                .take(max + 1)
                .take_while(|&&c| keep(c))
                .count();
            (n <= max).then(|| (chars[i..i + n].iter().collect::<String>(), i + n))
        };
        let starts_value = c.is_ascii_hexdigit() && (i == 0 || !word_char(chars[i - 1]));
        if starts_value
            && let Some((text, j)) = run(&|c| word_char(c) || c == ':', MAC_TEXT_MAX)
            && let Some(m) = mac(&text)
        {
            toks.push((Tok::Mac(m, text), column));
            i = j;
            continue;
        }
        // An IPv6 address: the longest run of hex digits, `:` and `.`
        // that starts here (as the scanner's longest match takes it),
        // beginning with a hex digit that does not continue a word, or
        // with `::`. What follows the run lexes on its own (`fe80::1g` is
        // an address and then a name, an error either way).
        if (starts_value || (c == ':' && two(':')))
            && let Some((text, j)) = run(
                &|c| c.is_ascii_hexdigit() || c == ':' || c == '.',
                IPV6_TEXT_MAX,
            )
            && let Some(a) = ipv6(&text)
        {
            toks.push((Tok::Addr6(a, text), column));
            i = j;
            continue;
        }
        let (tok, len) = match c {
            '(' => (Tok::LParen, 1),
            ')' => (Tok::RParen, 1),
            '[' => (Tok::LBrack, 1),
            ']' => (Tok::RBrack, 1),
            ':' => (Tok::Colon, 1),
            '/' => (Tok::Slash, 1),
            '-' => (Tok::Minus, 1),
            '&' if two('&') => (Tok::AndOp, 2),
            '&' => (Tok::Amp, 1),
            '|' if two('|') => (Tok::OrOp, 2),
            '|' => (Tok::Arith("|"), 1),
            '!' if two('=') => (Tok::Rel(RelOp::Ne), 2),
            '!' => (Tok::NotOp, 1),
            '=' if two('=') => (Tok::Rel(RelOp::Eq), 2),
            '=' => (Tok::Rel(RelOp::Eq), 1),
            '<' if two('=') => (Tok::Rel(RelOp::Le), 2),
            '<' if two('<') => (Tok::Arith("<<"), 2),
            '<' => (Tok::Rel(RelOp::Lt), 1),
            '>' if two('=') => (Tok::Rel(RelOp::Ge), 2),
            '>' if two('>') => (Tok::Arith(">>"), 2),
            '>' => (Tok::Rel(RelOp::Gt), 1),
            '+' => (Tok::Arith("+"), 1),
            '*' => (Tok::Arith("*"), 1),
            '%' => (Tok::Arith("%"), 1),
            '^' => (Tok::Arith("^"), 1),
            '0'..='9' => {
                let mut j = i;
                while j < chars.len() && (chars[j].is_ascii_alphanumeric() || chars[j] == '.') {
                    j += 1;
                }
                let text: String = chars[i..j].iter().collect();
                let tok = if text.contains('.') {
                    let bad = |reason| Error::BadAddress {
                        column,
                        text: text.clone(),
                        reason,
                    };
                    let parts: Vec<&str> = text.split('.').collect();
                    if parts.len() > 4 {
                        return Err(bad("more than four parts"));
                    }
                    let mut v = Vec::new();
                    for p in parts {
                        if p.is_empty() || !p.chars().all(|c| c.is_ascii_digit()) {
                            return Err(bad("each part must be a decimal number"));
                        }
                        // A part may exceed a byte here: a DECnet node
                        // does (`50.764`); an IPv4 address's parts are
                        // checked where one is read ([`ipv4`]).
                        match p.parse::<u32>() {
                            Ok(n) => v.push(n),
                            _ => return Err(bad("a part is greater than 255")),
                        }
                    }
                    Tok::Addr(v, text)
                } else if text.len() == 12 && text.chars().all(|c| c.is_ascii_hexdigit()) {
                    // libpcap's scanner takes twelve hex digits for a MAC
                    // address, even when they spell a number.
                    return Err(Error::Unsupported {
                        column,
                        feature: format!("{text:?}, which pcap reads as a MAC address"),
                    });
                } else {
                    Tok::Num(parse_number(&text, column)?, text)
                };
                (tok, j - i)
            }
            '\\' => {
                let mut j = i + 1;
                while j < chars.len() && word_char(chars[j]) {
                    j += 1;
                }
                if j == i + 1 {
                    return Err(Error::UnexpectedChar { column, found: c });
                }
                (Tok::Escaped(chars[i + 1..j].iter().collect()), j - i)
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                let mut j = i;
                while j < chars.len() && word_char(chars[j]) {
                    j += 1;
                }
                (Tok::Word(chars[i..j].iter().collect()), j - i)
            }
            found => return Err(Error::UnexpectedChar { column, found }),
        };
        toks.push((tok, column));
        i += len;
    }
    Ok((toks, chars.len() + 1))
}

// ---------------------------------------------------------------- parser

/// What kind of value a qualifier expects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AddrKind {
    /// No `host`/`net`/`port`/... written: a host.
    Default,
    Host,
    Net,
    Port,
    Portrange,
    Proto,
    /// After `iso proto`: an ISO network-layer protocol id.
    IsoProto,
    /// After `isis proto`: an IS-IS PDU type.
    IsisProto,
    /// After `decnet [dir] [host]`: a DECnet address.
    Decnet,
}

/// The qualifiers of a primitive, inherited by a bare value after it.
#[derive(Clone, Copy, Debug)]
struct Qual {
    proto: Option<(Proto, usize)>,
    dir: Dir,
    addr: AddrKind,
    /// The column of the `host`/`net`/... keyword, or of the head.
    addr_col: usize,
}

/// pcap-filter keywords this subset leaves out, rejected as unsupported
/// rather than taken for host names.
const UNSUPPORTED: &[&str] = &[
    "gateway",
    "broadcast",
    "multicast",
    "vlan",
    "mpls",
    "geneve",
    "vxlan",
    "icmp6",
    "igmp",
    "igrp",
    "pim",
    "vrrp",
    "carp",
    "ah",
    "esp",
    "atalk",
    "aarp",
    "decnet",
    "iso",
    "stp",
    "ipx",
    "netbeui",
    "lat",
    "moprc",
    "mopdl",
    "sca",
    "type",
    "subtype",
    "dir",
    "inbound",
    "outbound",
    "ifname",
    "on",
    "rnr",
    "srnr",
    "reason",
    "rset",
    "ruleset",
    "action",
    "protochain",
    "ra",
    "ta",
    "addr1",
    "addr2",
    "addr3",
    "addr4",
    "radio",
    "hdpvt",
    "iso",
    "byte",
];

/// Whether `w` is one of the ISO and IS-IS keywords of libpcap's scanner
/// (a protocol or a PDU set; `iso` is an LLC SAP name too, in
/// [`UNSUPPORTED`] for its qualified forms).
fn is_iso_word(w: &str) -> bool {
    iso_protocol(w).is_some() || IsisPdus::from_name(w).is_some()
}

/// The ISO network-layer protocol ids libpcap names (`clnp`, `esis` or
/// `es-is`, `isis` or `is-is`, and after `iso proto` as `\clnp`, `\esis`,
/// `\isis`).
fn iso_protocol(name: &str) -> Option<u32> {
    Some(match name {
        "clnp" => 0x81,
        "esis" | "es-is" => 0x82,
        "isis" | "is-is" => 0x83,
        _ => return None,
    })
}

/// ICMPv6's next-header number.
const IPPROTO_ICMPV6: u32 = 58;
/// IGMP's protocol number (`igmp`).
const IPPROTO_IGMP: u32 = 2;
/// VRRP's protocol number, which CARP shares (`vrrp`, `carp`).
const IPPROTO_VRRP: u32 = 112;

/// The LLC SAP names libpcap 1.10 resolves (its `llc_db`): as `ether
/// proto`, ISO and NetBEUI are a DSAP and SSAP test, STP a DSAP test, and
/// IPX its four encapsulations (see [`Primitive::EtherProto`]).
fn llc_sap(name: &str) -> Option<u32> {
    Some(match name {
        "iso" => 0xfe,
        "stp" => 0x42,
        "ipx" => 0xe0,
        "netbeui" => 0xf0,
        _ => return None,
    })
}

/// The EtherType names libpcap 1.10 knows (its `eproto_db`) besides
/// `ip`, `ip6`, `arp` and `rarp`: a plain EtherType test, but for the two
/// AppleTalk types, also matched in 802.2 SNAP (see
/// [`Primitive::EtherProto`]). `lldp` and `slow` came after 1.10 and are
/// not resolved.
fn plain_ethertype(name: &str) -> Option<u32> {
    Some(match name {
        "mopdl" => 0x6001,
        "moprc" => 0x6002,
        "decnet" => 0x6003,
        "lat" => 0x6004,
        "sca" => 0x6007,
        "loopback" => 0x9000,
        "atalk" => 0x809b,
        "aarp" => 0x80f3,
        _ => return None,
    })
}

fn proto_keyword(w: &str) -> Option<Proto> {
    Some(match w {
        // libpcap's lexer reads all seven as the link-layer qualifier
        // (LINK in scanner.l): on Ethernet they mean the same.
        "ether" | "link" | "ppp" | "slip" | "fddi" | "tr" | "wlan" => Proto::Ether,
        "ip" => Proto::Ip,
        "ip6" => Proto::Ip6,
        "arp" => Proto::Arp,
        "rarp" => Proto::Rarp,
        "tcp" => Proto::Tcp,
        "udp" => Proto::Udp,
        "icmp" => Proto::Icmp,
        "sctp" => Proto::Sctp,
        _ => return None,
    })
}

/// The bounds every filter is parsed within, so that parsing, lowering
/// and merging take bounded stack and bounded work on any input.
///
/// The defaults are [`MAX_FILTER_LEN`], [`MAX_NESTING`] and
/// [`MAX_PRIMITIVES`]. Lower limits are always safe; the stack bound the
/// crate documents (`docs/dpf.md`) holds for a nesting limit up to the
/// default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The longest filter text, in bytes.
    pub max_len: usize,
    /// The deepest nesting of parentheses and negations (`not`, `!`), and
    /// in arithmetic of parentheses, computed indexes (`ip[ip[0]]`), unary
    /// minuses, `%` and `^` (each takes the rest of the expression): a term
    /// inside `n` of them is at level `n`.
    pub max_nesting: usize,
    /// The most primitives (`tcp`, `host A`, `port N`, `ip[9] = 6`, and
    /// each bare value that inherits qualifiers) in one filter; a
    /// comparison with several packet loads counts one more per load
    /// after the first.
    pub max_primitives: usize,
}

/// The default limit on a filter's length: 64 KiB.
pub const MAX_FILTER_LEN: usize = 64 * 1024;
/// The default limit on nesting (parentheses and negations).
pub const MAX_NESTING: usize = 64;
/// The default limit on the number of primitives in one filter.
pub const MAX_PRIMITIVES: usize = 4096;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_len: MAX_FILTER_LEN,
            max_nesting: MAX_NESTING,
            max_primitives: MAX_PRIMITIVES,
        }
    }
}

struct Parser {
    toks: Vec<(Tok, usize)>,
    pos: usize,
    end: usize,
    limits: Limits,
    /// The parentheses and negations around the current term.
    depth: usize,
    /// The primitives parsed so far.
    primitives: usize,
    /// The `vlan` primitives parsed so far: each shifts the link-layer
    /// offsets of everything parsed after it by four bytes.
    vlans: u32,
    /// The `mpls` primitives parsed so far: each moves the link-layer
    /// payload of everything parsed after it four bytes on.
    labels: u32,
    /// The packet loads of the comparison being parsed: each after the
    /// first counts as one more primitive.
    loads: usize,
    /// A `pppoes` was parsed: what follows is read in its PPP frame.
    pppoes: bool,
    /// A `geneve` was parsed (where its outer header is): what follows is
    /// read in the packet it carries.
    geneve: Option<Outer>,
}

/// Parses a filter expression.
///
/// ```
/// let e = dpf::syntax::parse("tcp dst port 80 or 443").unwrap();
/// assert_eq!(e.to_string(), "tcp dst port 80 or tcp dst port 443");
/// ```
pub fn parse(src: &str) -> Result<Expr, Error> {
    parse_with(src, &Limits::default())
}

/// Parses a filter expression within `limits`: a longer filter, one
/// nested deeper or one with more primitives is an error
/// ([`Error::TooLong`], [`Error::TooDeep`], [`Error::TooManyPrimitives`]),
/// found before any work proportional to the excess is done.
///
/// ```
/// use dpf::syntax::{Limits, parse_with};
/// let limits = Limits { max_nesting: 2, ..Limits::default() };
/// assert!(parse_with("not not tcp", &limits).is_ok());
/// let e = parse_with("not not not tcp", &limits).unwrap_err();
/// assert_eq!(e.column(), Some(9));
/// ```
pub fn parse_with(src: &str, limits: &Limits) -> Result<Expr, Error> {
    if src.len() > limits.max_len {
        return Err(Error::TooLong {
            length: src.len(),
            limit: limits.max_len,
        });
    }
    let (toks, end) = lex(src)?;
    let mut p = Parser {
        toks,
        pos: 0,
        end,
        limits: *limits,
        depth: 0,
        primitives: 0,
        vlans: 0,
        labels: 0,
        loads: 0,
        pppoes: false,
        geneve: None,
    };
    if p.peek() == &Tok::End {
        return Err(p.unexpected("a filter expression (an empty filter is not supported)"));
    }
    let (e, _) = p.expr(None)?;
    if p.peek() != &Tok::End {
        return Err(p.unexpected("\"and\", \"or\" or the end of the filter"));
    }
    Ok(e)
}

impl Parser {
    fn peek(&self) -> &Tok {
        self.peek_at(0)
    }

    fn peek_at(&self, n: usize) -> &Tok {
        self.toks.get(self.pos + n).map_or(&Tok::End, |t| &t.0)
    }

    fn col(&self) -> usize {
        self.toks.get(self.pos).map_or(self.end, |t| t.1)
    }

    fn bump(&mut self) -> (Tok, usize) {
        let t = self
            .toks
            .get(self.pos)
            .cloned()
            .unwrap_or((Tok::End, self.end));
        self.pos += 1;
        t
    }

    fn is_word(&self, n: usize, w: &str) -> bool {
        matches!(self.peek_at(n), Tok::Word(x) if x == w)
    }

    fn unexpected(&self, expected: &str) -> Error {
        match self.peek() {
            Tok::Arith(op) => Error::Unsupported {
                column: self.col(),
                feature: format!("arithmetic (\"{op}\")"),
            },
            found => Error::Syntax {
                column: self.col(),
                expected: expected.to_string(),
                found: found.describe(),
            },
        }
    }

    fn expect(&mut self, tok: Tok, expected: &str) -> Result<(), Error> {
        if *self.peek() == tok {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.unexpected(expected))
        }
    }

    /// Refuses `what` after a `geneve`: dpf reads no second Geneve
    /// header, MPLS label stack or PPPoE session inside one.
    fn after_geneve(&self, column: usize, what: &str) -> Result<(), Error> {
        match self.geneve {
            Some(_) => Err(Error::Unsupported {
                column,
                feature: format!("\"{what}\" after \"geneve\""),
            }),
            None => Ok(()),
        }
    }

    /// The optional number after `vlan` or `pppoes`: taken if present and
    /// at most `max`, refused with `reason` if larger.
    fn optional_id(&mut self, max: u32, reason: &'static str) -> Result<Option<u32>, Error> {
        // libpcap's `pnum`: a number, or a `pnum` in parentheses (`vlan
        // (5)`). A `(` right after `vlan`, `mpls`, `pppoes` or `geneve`
        // can only begin one there, as libpcap's grammar has no other
        // way on from it.
        let open = (0..)
            .take_while(|&k| *self.peek_at(k) == Tok::LParen)
            .count();
        self.pos += open;
        let n = match self.peek().clone() {
            Tok::Num(n, _) if n <= max => n,
            Tok::Num(_, text) => {
                return Err(Error::BadNumber {
                    column: self.col(),
                    text,
                    reason,
                });
            }
            _ if open == 0 => return Ok(None),
            found => {
                return Err(Error::Syntax {
                    column: self.col(),
                    expected: "a number".into(),
                    found: found.describe(),
                });
            }
        };
        self.pos += 1;
        for _ in 0..open {
            if *self.peek() != Tok::RParen {
                return Err(Error::Syntax {
                    column: self.col(),
                    expected: "\")\"".into(),
                    found: self.peek().describe(),
                });
            }
            self.pos += 1;
        }
        Ok(Some(n))
    }

    /// Whether the token after the current word makes it a qualifier or
    /// a layer (`host`, `src`, `proto`, `[`...) rather than a protocol
    /// name alone.
    fn qualified_next(&self) -> bool {
        match self.peek_at(1) {
            Tok::LBrack => true,
            Tok::Word(n) => is_head_word(n) || n == "proto",
            _ => false,
        }
    }

    fn is_and(&self, n: usize) -> bool {
        matches!(self.peek_at(n), Tok::AndOp) || self.is_word(n, "and")
    }

    fn is_or(&self, n: usize) -> bool {
        matches!(self.peek_at(n), Tok::OrOp) || self.is_word(n, "or")
    }

    /// `expr = term { ("and" | "or") term }`, left-associative with equal
    /// precedence. `q` is the inherited qualifier; returns the qualifier
    /// a following bare value inherits.
    fn expr(&mut self, q: Option<Qual>) -> Result<(Expr, Option<Qual>), Error> {
        let (mut lhs, mut q) = self.term(q)?;
        loop {
            let and = if self.is_and(0) {
                true
            } else if self.is_or(0) {
                false
            } else {
                return Ok((lhs, q));
            };
            self.pos += 1;
            let (rhs, q2) = self.term(q)?;
            lhs = if and {
                Expr::And(Box::new(lhs), Box::new(rhs))
            } else {
                Expr::Or(Box::new(lhs), Box::new(rhs))
            };
            q = q2;
        }
    }

    /// Enters one more level of parentheses or negation, at `column`.
    fn enter(&mut self, column: usize) -> Result<(), Error> {
        if self.depth >= self.limits.max_nesting {
            return Err(Error::TooDeep {
                column,
                limit: self.limits.max_nesting,
            });
        }
        self.depth += 1;
        Ok(())
    }

    /// Counts one more primitive, starting at `column`.
    fn primitive(&mut self, column: usize) -> Result<(), Error> {
        if self.primitives >= self.limits.max_primitives {
            return Err(Error::TooManyPrimitives {
                column,
                limit: self.limits.max_primitives,
            });
        }
        self.primitives += 1;
        Ok(())
    }

    /// `term`: recursive only through parentheses and negations, so its
    /// depth is at most the nesting limit (an `and`/`or` chain is a loop
    /// in [`Parser::expr`]).
    fn term(&mut self, q: Option<Qual>) -> Result<(Expr, Option<Qual>), Error> {
        let (shift, labels, ppp, column) = (self.vlans, self.labels, self.pppoes, self.col());
        let geneve = self.geneve;
        let (mut e, q) = self.term_unshifted(q)?;
        // Every primitive after a `vlan` or an `mpls` reads its link-layer
        // payload further on, whatever the `and`, `or` and `not` between
        // them.
        if let (Expr::Prim(p), true) = (&mut e, shift + labels > 0) {
            // (A parenthesized primitive comes back shifted already.)
            if !matches!(
                p,
                Primitive::Vlan { .. }
                    | Primitive::Mpls { .. }
                    | Primitive::Shifted { .. }
                    | Primitive::Geneve { .. }
                    | Primitive::InGeneve { .. }
            ) {
                if ppp {
                    ppp_refusal(p, column)?;
                }
                // libpcap's gen_mpls_linktype: below MPLS only IPv4 and
                // IPv6 can be told (by the version), no other type.
                if labels > 0 && !crate::lower::supported_over_mpls(p) {
                    return Err(Error::BadQualifier {
                        column,
                        message: format!("unsupported protocol over mpls: {p}"),
                    });
                }
                let inner = std::mem::replace(p, Primitive::Broadcast);
                *p = Primitive::Shifted {
                    shift,
                    labels,
                    ppp,
                    inner: Box::new(inner),
                };
            }
        }
        // Every primitive after a `geneve` is read in the packet it
        // carries (libpcap's offsets stay moved, whatever the `and`, `or`
        // and `not` between them).
        if let (Expr::Prim(p), Some(outer)) = (&mut e, geneve)
            && !matches!(p, Primitive::Geneve { .. } | Primitive::InGeneve { .. })
        {
            let inner = std::mem::replace(p, Primitive::Broadcast);
            *p = Primitive::InGeneve {
                outer,
                inner: Box::new(inner),
            };
        }
        Ok((e, q))
    }

    fn term_unshifted(&mut self, q: Option<Qual>) -> Result<(Expr, Option<Qual>), Error> {
        let column = self.col();
        let tok = self.peek().clone();
        if tok == Tok::NotOp || tok == Tok::Word("not".into()) {
            self.enter(column)?;
            self.pos += 1;
            let (e, q) = self.term(q)?;
            self.depth -= 1;
            return Ok((Expr::Not(Box::new(e)), q));
        }
        let arith_start = matches!(&tok, Tok::Word(w) if arith_word(w)) || self.is_layer(0);
        if arith_start || self.relation_ahead() {
            self.primitive(column)?;
            return Ok((Expr::Prim(self.relation(column)?), None));
        }
        if tok == Tok::LParen {
            self.enter(column)?;
            self.pos += 1;
            let (e, _) = self.expr(q)?;
            self.expect(Tok::RParen, "\")\"")?;
            self.depth -= 1;
            return Ok((e, q));
        }
        if matches!(
            tok,
            Tok::Num(..)
                | Tok::Addr(..)
                | Tok::Mac(..)
                | Tok::Addr6(..)
                | Tok::Escaped(_)
                | Tok::Word(_)
        ) && !self.is_and(0)
            && !self.is_or(0)
        {
            self.primitive(column)?;
        }
        match tok {
            Tok::Num(_, text) | Tok::Addr(_, text) | Tok::Addr6(_, text) => {
                let Some(q) = q else {
                    return Err(Error::MissingQualifier { column, text });
                };
                let p = self.value(q)?;
                Ok((Expr::Prim(p), Some(q)))
            }
            Tok::Mac(_, text) => {
                let Some(q) = q else {
                    return Err(Error::MissingQualifier { column, text });
                };
                let p = self.value(q)?;
                Ok((Expr::Prim(p), Some(q)))
            }
            Tok::Escaped(name) => {
                let Some(q) = q else {
                    return Err(Error::MissingQualifier {
                        column,
                        text: format!("\\{name}"),
                    });
                };
                let p = self.value(q)?;
                Ok((Expr::Prim(p), Some(q)))
            }
            // A bare protocol name after `ip proto N or`: libpcap's
            // inherited id, looked up in the protocols database.
            Tok::Word(w)
                if !is_keyword(&w)
                    && matches!(q, Some(Qual { addr: AddrKind::Proto, proto, .. }) if proto.is_none_or(|(p, _)| p != Proto::Ether)) =>
            {
                let q = q.expect("matched above");
                let p = self.value(q)?;
                Ok((Expr::Prim(p), Some(q)))
            }
            Tok::Word(w) => self.word_term(&w, column),
            _ => Err(self.unexpected("a primitive, \"not\" or \"(\"")),
        }
    }

    fn word_term(&mut self, w: &str, column: usize) -> Result<(Expr, Option<Qual>), Error> {
        if let Some(proto) = proto_keyword(w) {
            match self.peek_at(1) {
                Tok::Word(n) if n == "proto" => {
                    self.pos += 2;
                    let q = Qual {
                        proto: Some((proto, column)),
                        dir: Dir::SrcOrDst,
                        addr: AddrKind::Proto,
                        addr_col: column,
                    };
                    let p = self.value(q)?;
                    return Ok((Expr::Prim(p), Some(q)));
                }
                Tok::Word(n) if is_head_word(n) => {
                    self.pos += 1;
                    return self.head(Some((proto, column)));
                }
                // `ip protochain`, `ip6 protochain`: left out, as alone.
                Tok::Word(n) if n == "protochain" => {
                    self.pos += 1;
                    return Err(Error::Unsupported {
                        column: self.col(),
                        feature: "the \"protochain\" primitive or qualifier".into(),
                    });
                }
                Tok::Word(n) if n == "broadcast" || n == "multicast" => {
                    let p = match (proto, n.as_str()) {
                        (Proto::Ether, "broadcast") => Primitive::Broadcast,
                        (Proto::Ether, _) => Primitive::Multicast,
                        (Proto::Ip, "multicast") => Primitive::IpMulticast,
                        (Proto::Ip6, "multicast") => Primitive::Ip6Multicast,
                        // libpcap's gen_broadcast needs the capture's
                        // netmask for `ip broadcast`; dpf is given none,
                        // as pcap_compile is given PCAP_NETMASK_UNKNOWN.
                        (Proto::Ip, _) => return Err(Error::NetmaskUnknown { column }),
                        _ => {
                            return Err(Error::Unsupported {
                                column,
                                feature: format!("\"{} {n}\"", proto.name()),
                            });
                        }
                    };
                    self.pos += 2;
                    return Ok((Expr::Prim(p), None));
                }
                _ => {}
            }
            self.pos += 1;
            if proto == Proto::Ether {
                return Err(self.unexpected("\"proto\" or \"[\" after \"ether\""));
            }
            return Ok((Expr::Prim(Primitive::Proto(proto)), None));
        }
        if is_head_word(w) {
            return self.head(None);
        }
        match w {
            "and" | "or" => Err(self.unexpected("a primitive, \"not\" or \"(\"")),
            // libpcap's Q_PROTO with Q_DEFAULT: a bare value after it
            // inherits `proto` (`proto 6 or 17`).
            "proto" => {
                self.pos += 1;
                let q = Qual {
                    proto: None,
                    dir: Dir::SrcOrDst,
                    addr: AddrKind::Proto,
                    addr_col: column,
                };
                let p = self.value(q)?;
                Ok((Expr::Prim(p), Some(q)))
            }
            // libpcap's gen_broadcast and gen_multicast take Q_DEFAULT
            // as the link layer on Ethernet.
            "broadcast" => {
                self.pos += 1;
                Ok((Expr::Prim(Primitive::Broadcast), None))
            }
            "multicast" => {
                self.pos += 1;
                Ok((Expr::Prim(Primitive::Multicast), None))
            }
            "decnet" if self.is_word(1, "proto") => Err(Error::BadQualifier {
                column,
                message: "DECNET encapsulation is not specifiable".into(),
            }),
            "decnet" if self.qualified_next() && *self.peek_at(1) != Tok::LBrack => {
                self.pos += 1;
                self.decnet_head()
            }
            // libpcap's gen_proto_abbrev: these seven are gen_linktype of
            // their EtherType alone, IGMP, VRRP and CARP `ip proto N`.
            // Followed by a qualifier or an offset (`lat host`,
            // `vrrp[0]`) they stay unsupported, below; `decnet host` is
            // above.
            "decnet" | "lat" | "mopdl" | "moprc" | "sca" | "atalk" | "aarp"
                if !self.qualified_next() =>
            {
                let feature = format!("the \"{w}\" primitive");
                let t = plain_ethertype(w).ok_or(Error::Unsupported { column, feature })?;
                self.pos += 1;
                Ok((Expr::Prim(Primitive::EtherProto(t)), None))
            }
            // libpcap's `pqual PROTO id` for Q_ISO and Q_ISIS; a bare
            // value after it inherits the qualifier (`iso proto 0x81 or
            // 0x82`).
            "iso" | "isis" if self.is_word(1, "proto") => {
                self.pos += 2;
                let q = Qual {
                    proto: None,
                    dir: Dir::SrcOrDst,
                    addr: if w == "iso" {
                        AddrKind::IsoProto
                    } else {
                        AddrKind::IsisProto
                    },
                    addr_col: column,
                };
                let p = self.value(q)?;
                Ok((Expr::Prim(p), Some(q)))
            }
            // libpcap's gen_proto refuses these two.
            "esis" | "es-is" | "clnp" if self.is_word(1, "proto") => Err(Error::BadQualifier {
                column,
                message: if w == "clnp" {
                    "'clnp proto' is not supported".into()
                } else {
                    "'esis proto' is bogus".into()
                },
            }),
            // ISO hosts, networks and ports are not libpcap's either.
            w if (w == "iso" || is_iso_word(w)) && self.qualified_next() => {
                Err(Error::BadQualifier {
                    column,
                    message: format!(
                        "\"{w}\" is followed by no host, net, port or offset \
                         (ISO host filtering not implemented, as in libpcap)"
                    ),
                })
            }
            // Alone: a protocol (`isis`) or a set of IS-IS PDU types (`l1`).
            w if is_iso_word(w) => {
                self.pos += 1;
                let p = iso_protocol(w).map_or_else(
                    || Primitive::IsisPdus(IsisPdus::from_name(w).expect("an ISO word")),
                    Primitive::IsoProto,
                );
                Ok((Expr::Prim(p), None))
            }
            // libpcap's gen_proto_abbrev: gen_linktype of the LLC SAP.
            "iso" | "stp" | "ipx" | "netbeui" if !self.qualified_next() => {
                let feature = format!("the \"{w}\" primitive");
                let t = llc_sap(w).ok_or(Error::Unsupported { column, feature })?;
                self.pos += 1;
                Ok((Expr::Prim(Primitive::EtherProto(t)), None))
            }
            // libpcap 1.10's gen_vlan without the kernel's VLAN
            // extensions (as for a capture file): a TPID test, the VID,
            // then every later link-layer offset moves four bytes on, so
            // the n-th `vlan` (in text order, whatever the `and`, `or`
            // and `not` around it) looks at the n-th tag.
            "vlan" => {
                if self.labels > 0 {
                    // libpcap's gen_vlan: its offsets past a label stack
                    // are not a tag's.
                    return Err(Error::BadQualifier {
                        column,
                        message: "no VLAN match after MPLS".into(),
                    });
                }
                // gen_vlan on the link layer `pppoes` leaves.
                if self.pppoes {
                    return Err(Error::BadQualifier {
                        column,
                        message: "no VLAN support for PPP".into(),
                    });
                }
                self.pos += 1;
                let id = self
                    .optional_id(0x0fff, "a VLAN id is at most 4095")?
                    .map(|n| n as u16);
                let shift = self.vlans;
                self.vlans += 1;
                Ok((Expr::Prim(Primitive::Vlan { shift, id }), None))
            }
            // libpcap's gen_mpls: the MPLS EtherType (or, below another
            // label, that label's bottom-of-stack bit clear), the label,
            // then every later payload offset four bytes on.
            "mpls" => {
                self.after_geneve(column, "mpls")?;
                self.pos += 1;
                let label = self.optional_id(0xf_ffff, "an MPLS label is at most 1048575")?;
                let (shift, depth) = (self.vlans, self.labels);
                self.labels += 1;
                Ok((
                    Expr::Prim(Primitive::Mpls {
                        shift,
                        ppp: self.pppoes,
                        depth,
                        label,
                    }),
                    None,
                ))
            }
            // libpcap's `LLC` and `LLC ID` productions: any name after
            // `llc` is its frame kind (`rnr` is a keyword of libpcap's
            // scanner with its own production, the same meaning).
            "llc" => {
                self.pos += 1;
                let kind = match self.peek().clone() {
                    Tok::Word(name) if name == "rnr" || !is_keyword(&name) => {
                        let at = self.col();
                        let kind =
                            LlcKind::from_name(&name).ok_or_else(|| Error::BadQualifier {
                                column: at,
                                message: format!(
                                    "unknown LLC type name \"{name}\" (expected i, s, u, rr, rnr, \
                                 rej, ui, ua, disc, dm, sabme, test, xid or frmr)"
                                ),
                            })?;
                        self.pos += 1;
                        Some(kind)
                    }
                    _ => None,
                };
                Ok((Expr::Prim(Primitive::Llc(kind)), None))
            }
            // libpcap's gen_pppoed: an EtherType test.
            "pppoed" => {
                self.pos += 1;
                Ok((Expr::Prim(Primitive::EtherProto(0x8863)), None))
            }
            // libpcap's gen_pppoes: the EtherType, then the session id in
            // the low 16 bits of the four bytes at 14; then the link layer
            // is the PPP frame 6 bytes into the payload, its type the
            // PPP protocol and its payload after that: every later type
            // and payload offset 8 bytes on, as two tags would move them.
            "pppoes" => {
                self.after_geneve(column, "pppoes")?;
                if self.pppoes {
                    return Err(Error::Unsupported {
                        column,
                        feature: "a \"pppoes\" after another".into(),
                    });
                }
                self.pos += 1;
                let id = self
                    .optional_id(0xffff, "a PPPoE session id is at most 65535")?
                    .map(|n| n as u16);
                self.pppoes = true;
                self.vlans += 2;
                Ok((Expr::Prim(Primitive::Pppoes { id }), None))
            }
            "igmp" | "vrrp" | "carp" if !self.qualified_next() => {
                self.pos += 1;
                let n = if w == "igmp" {
                    IPPROTO_IGMP
                } else {
                    IPPROTO_VRRP
                };
                Ok((Expr::Prim(Primitive::IpProto(n)), None))
            }
            // `less N` and `greater N` take a number only (libpcap's
            // `LESS NUM`): `len <= N` and `len >= N`.
            "less" | "greater" => {
                self.pos += 1;
                let n = match self.peek() {
                    Tok::Num(n, _) => *n,
                    _ => return Err(self.unexpected("a number")),
                };
                self.pos += 1;
                let op = if w == "less" { RelOp::Le } else { RelOp::Ge };
                Ok((
                    Expr::Prim(Primitive::Relation(Box::new(Relation {
                        lhs: vec![Arith::Len],
                        op,
                        rhs: vec![Arith::Num(n)],
                        column,
                    }))),
                    None,
                ))
            }
            "icmp6" => {
                self.pos += 1;
                Ok((Expr::Prim(Primitive::Ip6Proto(IPPROTO_ICMPV6)), None))
            }
            // libpcap 1.10's gen_geneve: IPv4 or IPv6 UDP to port 6081
            // with a Geneve header of version 0 (and the VNI); then every
            // later link-layer offset is the encapsulated packet's, found
            // from the outer IPv4 header's length and the Geneve option
            // length (its tags and labels count afresh).
            "geneve" => {
                self.after_geneve(column, "geneve")?;
                if self.labels > 0 {
                    // libpcap 1.10 keeps its label stack depth: what
                    // follows would be read as below a label (at the
                    // inner payload's offset less 2, out of bounds).
                    return Err(Error::Unsupported {
                        column,
                        feature: "\"geneve\" after \"mpls\"".into(),
                    });
                }
                self.pos += 1;
                let vni = self.optional_id(0x00ff_ffff, "a Geneve VNI is at most 16777215")?;
                let outer = Outer {
                    shift: self.vlans,
                    ppp: self.pppoes,
                };
                self.geneve = Some(outer);
                self.vlans = 0;
                self.labels = 0;
                self.pppoes = false;
                Ok((Expr::Prim(Primitive::Geneve { vni, outer, column }), None))
            }
            "vxlan" => Err(Error::Unsupported {
                column,
                feature: "\"vxlan\" (a primitive libpcap added after 1.10, whose \
                          semantics dpf follows)"
                    .into(),
            }),
            "mask" => Err(self.unexpected("a primitive, \"not\" or \"(\"")),
            w if UNSUPPORTED.contains(&w) => Err(Error::Unsupported {
                column,
                feature: format!("the \"{w}\" primitive or qualifier"),
            }),
            _ => Err(Error::NameNotResolved {
                column,
                name: w.to_string(),
            }),
        }
    }

    /// `dir = src | dst | src and dst | src or dst`, if one is written,
    /// and the column after it.
    fn direction(&mut self) -> (Dir, usize) {
        if !(self.is_word(0, "src") || self.is_word(0, "dst")) {
            return (Dir::SrcOrDst, self.col());
        }
        let first_src = self.is_word(0, "src");
        let other = if first_src { "dst" } else { "src" };
        self.pos += 1;
        let mut dir = if first_src { Dir::Src } else { Dir::Dst };
        if (self.is_and(0) || self.is_or(0)) && self.is_word(1, other) {
            dir = if self.is_and(0) {
                Dir::SrcAndDst
            } else {
                Dir::SrcOrDst
            };
            self.pos += 2;
        }
        (dir, self.col())
    }

    /// `decnet [dir] [host]`, then a DECnet address: the one primitive
    /// with the `decnet` qualifier (libpcap's `gen_dnhost`; 1.10 also
    /// took `net` as `host`, later releases refuse it, as dpf does).
    /// `decnet` has been consumed.
    fn decnet_head(&mut self) -> Result<(Expr, Option<Qual>), Error> {
        let (dir, col) = self.direction();
        if let Tok::Word(w) = self.peek() {
            match w.as_str() {
                "host" => self.pos += 1,
                "net" | "port" | "portrange" | "gateway" => {
                    return Err(Error::BadQualifier {
                        column: col,
                        message: format!("'{w}' is not a valid qualifier for 'decnet'"),
                    });
                }
                _ => {}
            }
        }
        let q = Qual {
            proto: None,
            dir,
            addr: AddrKind::Decnet,
            addr_col: col,
        };
        let p = self.value(q)?;
        Ok((Expr::Prim(p), Some(q)))
    }

    /// `head = [proto] [dir] [addr]`, at least a direction or an address
    /// kind, followed by its value. The protocol has been consumed.
    fn head(&mut self, proto: Option<(Proto, usize)>) -> Result<(Expr, Option<Qual>), Error> {
        let (dir, col) = self.direction();
        let addr = match self.peek() {
            Tok::Word(w) => match w.as_str() {
                "host" => AddrKind::Host,
                "net" => AddrKind::Net,
                "port" => AddrKind::Port,
                "portrange" => AddrKind::Portrange,
                "gateway" => {
                    return Err(Error::Unsupported {
                        column: col,
                        feature: "\"gateway\"".into(),
                    });
                }
                _ => AddrKind::Default,
            },
            _ => AddrKind::Default,
        };
        if addr != AddrKind::Default {
            self.pos += 1;
        }
        let q = Qual {
            proto,
            dir,
            addr,
            addr_col: col,
        };
        let p = self.value(q)?;
        Ok((Expr::Prim(p), Some(q)))
    }

    /// The prefix length after a `/` (which the caller took), at most
    /// `max`, refused with `reason` if larger.
    fn prefix_length(&mut self, max: u32, reason: &'static str) -> Result<u32, Error> {
        let column = self.col();
        match self.bump().0 {
            Tok::Num(n, _) if n <= max => Ok(n),
            Tok::Num(_, text) => Err(Error::BadNumber {
                column,
                text,
                reason,
            }),
            _ => {
                self.pos -= 1;
                Err(self.unexpected("a prefix length"))
            }
        }
    }

    /// An IPv6 address after a `host` or `net` qualifier (or none), with
    /// its prefix length if one is written, as libpcap's `gen_mcode6` and
    /// `gen_host6` take it: IPv6 alone, whatever the qualifier says, so
    /// any protocol but `ip6` is an error.
    fn value6(
        &mut self,
        q: Qual,
        net: bool,
        addr: [u8; 16],
        text: String,
    ) -> Result<Primitive, Error> {
        let column = self.col();
        let what = if net { "net" } else { "host" };
        if let Some((p, c)) = q.proto
            && p != Proto::Ip6
        {
            let message = match p {
                Proto::Ether => format!("link-layer modifier applied to ip6 {what}"),
                p => format!("'{}' modifier applied to ip6 {what}", p.name()),
            };
            return Err(Error::BadQualifier { column: c, message });
        }
        self.pos += 1;
        let len = if *self.peek() == Tok::Slash {
            self.pos += 1;
            self.prefix_length(128, "an IPv6 prefix length is at most 128")? as u8
        } else {
            128
        };
        if u128::from_be_bytes(addr) & !mask6(len) != 0 {
            return Err(Error::BadAddress {
                column,
                text,
                reason: "non-network bits set",
            });
        }
        if net {
            return Ok(Primitive::Net6 {
                dir: q.dir,
                addr,
                len,
            });
        }
        if len != 128 {
            return Err(Error::BadAddress {
                column,
                text,
                reason: "a host takes no prefix length but 128 (use net for a network)",
            });
        }
        Ok(Primitive::Host6 { dir: q.dir, addr })
    }

    /// The value (id) after a head, or a bare value with an inherited
    /// qualifier.
    fn value(&mut self, q: Qual) -> Result<Primitive, Error> {
        let column = self.col();
        let proto = q.proto.map(|p| p.0);
        let bad_proto = |what: &str| -> Error {
            let (p, c) = q.proto.expect("checked by callers");
            Error::BadQualifier {
                column: c,
                message: format!("'{}' modifier applied to {what}", Proto::name(p)),
            }
        };
        match q.addr {
            AddrKind::Default | AddrKind::Host | AddrKind::Net => {
                let net = q.addr == AddrKind::Net;
                if let (Some(Proto::Ether), false, Tok::Mac(addr, _)) = (proto, net, self.peek()) {
                    let addr = *addr;
                    self.pos += 1;
                    return Ok(Primitive::EtherHost { dir: q.dir, addr });
                }
                if let (Tok::Mac(_, text), false) = (self.peek(), proto == Some(Proto::Ether)) {
                    // libpcap: "ethernet address used in non-ether expression".
                    return Err(Error::BadAddress {
                        column,
                        text: text.clone(),
                        reason: "a MAC address needs the ether qualifier (ether host, ether src)",
                    });
                }
                if let Tok::Addr6(addr, text) = self.peek().clone() {
                    return self.value6(q, net, addr, text);
                }
                match proto {
                    None | Some(Proto::Ip | Proto::Arp | Proto::Rarp) => {}
                    Some(Proto::Ether) => {
                        return Err(Error::Unsupported {
                            column: q.proto.unwrap().1,
                            feature: if net {
                                "\"ether net\" (a link-level network)".into()
                            } else {
                                "a link-level host that is not a MAC address".into()
                            },
                        });
                    }
                    Some(_) => return Err(bad_proto(if net { "net" } else { "host" })),
                }
                let (tok, _) = self.bump();
                let (parts, text) = match tok {
                    Tok::Addr(parts, text) => (parts, text),
                    // libpcap promotes a network number to the top of the
                    // address, widening the mask a byte at a time:
                    // `net 10` is 10.0.0.0/8.
                    Tok::Num(v, _) if net => {
                        let (mut v, mut mask) = (v, u32::MAX);
                        while v != 0 && v & 0xff00_0000 == 0 {
                            v <<= 8;
                            mask <<= 8;
                        }
                        return Ok(Primitive::Net {
                            proto,
                            dir: q.dir,
                            addr: v,
                            mask,
                        });
                    }
                    Tok::Num(_, text) => {
                        return Err(Error::BadAddress {
                            column,
                            text,
                            reason: "write an IPv4 address as a dotted quad",
                        });
                    }
                    Tok::Word(name) if !is_keyword(&name) => {
                        return Err(Error::NameNotResolved { column, name });
                    }
                    _ => {
                        self.pos -= 1;
                        return Err(self.unexpected("an IPv4 address"));
                    }
                };
                let addr = ipv4(&parts, &text, column)?;
                if !net {
                    if parts.len() != 4 {
                        return Err(Error::BadAddress {
                            column,
                            text,
                            reason: "a host address needs all four parts (use net for a network)",
                        });
                    }
                    return Ok(Primitive::Host {
                        proto,
                        dir: q.dir,
                        addr,
                    });
                }
                let mask = if *self.peek() == Tok::Slash {
                    self.pos += 1;
                    let len = self.prefix_length(32, "a prefix length is at most 32")?;
                    // A partial network is promoted, as libpcap's
                    // gen_mcode does: 192.168/16 is 192.168.0.0/16.
                    if len == 0 { 0 } else { u32::MAX << (32 - len) }
                } else if self.is_word(0, "mask") {
                    self.pos += 1;
                    let at = self.col();
                    match self.bump().0 {
                        // Both promoted, as libpcap's gen_mcode does:
                        // 192.168 mask 255.255 is 192.168.0.0/16.
                        Tok::Addr(m, text) => ipv4(&m, &text, at)?,
                        _ => {
                            self.pos -= 1;
                            return Err(self.unexpected("a netmask"));
                        }
                    }
                } else {
                    u32::MAX << (32 - 8 * parts.len() as u32)
                };
                if addr & !mask != 0 {
                    return Err(Error::BadAddress {
                        column,
                        text,
                        reason: "non-network bits set",
                    });
                }
                Ok(Primitive::Net {
                    proto,
                    dir: q.dir,
                    addr,
                    mask,
                })
            }
            AddrKind::Port | AddrKind::Portrange => {
                let kw = if q.addr == AddrKind::Port {
                    "port"
                } else {
                    "portrange"
                };
                match proto {
                    None | Some(Proto::Tcp | Proto::Udp | Proto::Sctp) => {}
                    Some(p) => {
                        return Err(Error::BadQualifier {
                            column: q.proto.unwrap().1,
                            message: format!("illegal qualifier '{}' of '{kw}'", p.name()),
                        });
                    }
                }
                let range = q.addr == AddrKind::Portrange;
                let column = self.col();
                let (first, last, real, name) = match self.peek().clone() {
                    Tok::Word(name) if !is_keyword(&name) => {
                        self.pos += 1;
                        let (first, last, real) = resolve_ports(&name, range, column)?;
                        (first, last, real, name)
                    }
                    _ => {
                        let first = self.port_number()?;
                        // libpcap reads `portrange N` as the range N-N.
                        let last = if range && *self.peek() == Tok::Minus {
                            self.pos += 1;
                            match self.peek().clone() {
                                // `25-domain`: a number's transports are
                                // all three, so the range's are too.
                                Tok::Word(side) if !is_keyword(&side) => {
                                    let c = self.col();
                                    self.pos += 1;
                                    resolve_port(&side, c)?.0
                                }
                                _ => self.port_number()?,
                            }
                        } else {
                            first
                        };
                        (first, last, None, String::new())
                    }
                };
                let (first, last) = (first.min(last), first.max(last));
                // A name of one transport restricts the primitive to it,
                // and may not be qualified by another (libpcap's rule).
                let proto = match (proto, real) {
                    (Some(q), Some(r)) if q != r => {
                        return Err(Error::PortProtocol {
                            column,
                            name,
                            proto: r.name(),
                        });
                    }
                    (Some(q), _) => Some(q),
                    (None, r) => r,
                };
                Ok(Primitive::Port {
                    proto,
                    dir: q.dir,
                    first,
                    last,
                    range: q.addr == AddrKind::Portrange,
                })
            }
            // `iso proto`: a number, or one of libpcap's three names
            // escaped (unescaped they are keywords, a syntax error).
            AddrKind::IsoProto => {
                let n = match self.peek().clone() {
                    // libpcap 1.10 compares a larger number with the byte
                    // (never equal); its later releases refuse it, as dpf
                    // does.
                    Tok::Num(n, text) if n > 0xff => {
                        return Err(Error::BadNumber {
                            column,
                            text,
                            reason: "an ISO network-layer protocol id is at most 255",
                        });
                    }
                    Tok::Num(n, _) => n,
                    Tok::Escaped(name) => iso_protocol(&name).ok_or(Error::BadQualifier {
                        column,
                        message: format!("unknown osi proto '{name}' (clnp, esis or isis)"),
                    })?,
                    _ => return Err(self.unexpected("an ISO protocol number")),
                };
                self.pos += 1;
                Ok(Primitive::IsoProto(n))
            }
            // `isis proto`: a number only (libpcap looks a name up as an
            // IP protocol's and refuses it).
            AddrKind::IsisProto => match *self.peek() {
                // The PDU type is the byte's low five bits; as above, later
                // libpcap releases refuse a larger number.
                Tok::Num(n, ref text) if n > 0x1f => Err(Error::BadNumber {
                    column,
                    text: text.clone(),
                    reason: "an IS-IS PDU type is at most 31",
                }),
                Tok::Num(n, _) => {
                    self.pos += 1;
                    Ok(Primitive::IsisProto(n))
                }
                _ => Err(self.unexpected("an IS-IS PDU type")),
            },
            // AREA.NODE, six bits and ten. libpcap 1.10's __pcap_atodn
            // dropped the bits past them and read a number as the
            // address's 16 bits; later releases refuse both, as dpf does
            // (the wire's address is little-endian, so a number would not
            // mean what it seems to).
            AddrKind::Decnet => {
                let bad = |text: String, reason| Error::BadAddress {
                    column,
                    text,
                    reason,
                };
                let addr = match self.peek().clone() {
                    Tok::Addr(parts, text) => match parts[..] {
                        [area, node] if area <= 63 && node <= 1023 => area << 10 | node,
                        [_, _] => {
                            return Err(bad(
                                text,
                                "a DECnet area is at most 63 and a node at most 1023",
                            ));
                        }
                        _ => return Err(bad(text, "a DECnet address is AREA.NODE")),
                    },
                    Tok::Num(_, text) => return Err(bad(text, "a DECnet address is AREA.NODE")),
                    Tok::Addr6(..) => {
                        return Err(Error::BadQualifier {
                            column: q.addr_col,
                            message: "'decnet' modifier applied to ip6 host".into(),
                        });
                    }
                    Tok::Mac(_, text) => {
                        return Err(bad(
                            text,
                            "a MAC address needs the ether qualifier (ether host, ether src)",
                        ));
                    }
                    Tok::Word(name) if !is_keyword(&name) => {
                        return Err(Error::NameNotResolved { column, name });
                    }
                    _ => return Err(self.unexpected("a DECnet address (AREA.NODE)")),
                };
                self.pos += 1;
                Ok(Primitive::DecnetHost {
                    dir: q.dir,
                    addr: addr as u16,
                })
            }
            AddrKind::Proto => {
                let Some((p, _)) = q.proto else {
                    return Ok(Primitive::AnyProto(self.proto_number(Proto::Ip)?));
                };
                if !matches!(p, Proto::Ip | Proto::Ip6 | Proto::Ether) {
                    return Err(Error::Unsupported {
                        column: q.addr_col,
                        feature: format!(
                            "\"{} proto\" (only ip proto, ip6 proto and ether proto)",
                            p.name()
                        ),
                    });
                }
                let n = self.proto_number(p)?;
                if p == Proto::Ip6 {
                    return Ok(Primitive::Ip6Proto(n));
                }
                if p == Proto::Ip {
                    return Ok(Primitive::IpProto(n));
                }
                {
                    // libpcap 1.10 silently truncates these; its later
                    // releases refuse them, and so does dpf: a value up to
                    // 1500 is an LLC DSAP (one byte), above an EtherType.
                    let too_high = if n > 0xffff {
                        Some("an EtherType is at most 65535")
                    } else if (0x100..=1500).contains(&n) {
                        Some("an LLC DSAP (a protocol of 1500 or below) is at most 255")
                    } else {
                        None
                    };
                    if let Some(reason) = too_high {
                        return Err(Error::BadNumber {
                            column,
                            text: n.to_string(),
                            reason,
                        });
                    }
                    Ok(Primitive::EtherProto(n))
                }
            }
        }
    }

    /// The value after `proto`: a number, or a name of the qualifier's
    /// protocol (`\tcp` after `ip`, `ip6` or none, `\arp` after `ether`).
    fn proto_number(&mut self, p: Proto) -> Result<u32, Error> {
        let column = self.col();
        let (tok, _) = self.bump();
        let known = match (&tok, p) {
            (Tok::Num(n, _), _) => return Ok(*n),
            (Tok::Escaped(w) | Tok::Word(w), Proto::Ether) => match w.as_str() {
                "ip" => Some(0x800),
                "arp" => Some(0x806),
                "rarp" => Some(0x8035),
                "ip6" => Some(0x86dd),
                _ => plain_ethertype(w).or_else(|| llc_sap(w)),
            },
            (Tok::Escaped(w) | Tok::Word(w), _) => match w.as_str() {
                "icmp" => Some(1),
                "tcp" => Some(6),
                "udp" => Some(17),
                "sctp" => Some(132),
                // Any other keyword is one in libpcap's scanner too, where
                // it is a syntax error; an escaped name or any other word
                // is libpcap's pcap_nametoproto.
                _ if matches!(tok, Tok::Escaped(_)) || !is_keyword(w) => {
                    match crate::protocols::resolve(w) {
                        Some(n) => Some(n.into()),
                        None => {
                            return Err(Error::UnknownProtocol {
                                column,
                                name: w.clone(),
                            });
                        }
                    }
                }
                _ => None,
            },
            _ => {
                self.pos -= 1;
                return Err(self.unexpected("a protocol number"));
            }
        };
        match (known, tok) {
            (Some(n), _) => Ok(n),
            (None, Tok::Escaped(name) | Tok::Word(name)) => {
                Err(Error::NameNotResolved { column, name })
            }
            (None, _) => unreachable!("only names are looked up"),
        }
    }

    fn port_number(&mut self) -> Result<u16, Error> {
        let column = self.col();
        match self.bump().0 {
            Tok::Num(n, text) => u16::try_from(n).map_err(|_| Error::BadNumber {
                column,
                text,
                reason: "a port number is at most 65535",
            }),
            Tok::Word(name) if !is_keyword(&name) => Err(Error::NameNotResolved { column, name }),
            _ => {
                self.pos -= 1;
                Err(self.unexpected("a port number"))
            }
        }
    }

    /// Whether the term at the cursor is a comparison (`arth relop arth`)
    /// rather than a boolean term: scanning ahead over tokens an
    /// arithmetic expression can hold, a relational operator comes first
    /// outside every parenthesis opened in the scan. A boolean
    /// parenthesis shows itself by a boolean token, or a relation inside
    /// it. The scan stops at the first token that settles it.
    fn relation_ahead(&self) -> bool {
        match self.peek() {
            Tok::LParen | Tok::Minus | Tok::Num(..) => {}
            Tok::Word(w) if arith_word(w) || self.is_layer(0) => {}
            _ => return false,
        }
        let mut depth = 0usize;
        let mut i = 0;
        loop {
            match self.peek_at(i) {
                Tok::LParen | Tok::LBrack => depth += 1,
                Tok::RParen | Tok::RBrack => match depth.checked_sub(1) {
                    Some(d) => depth = d,
                    None => return false,
                },
                Tok::Rel(_) => return depth == 0,
                Tok::Num(..) | Tok::Arith(_) | Tok::Minus | Tok::Amp | Tok::Slash | Tok::Colon => {}
                Tok::Word(w) if arith_word(w) || self.is_layer(i) => {}
                _ => return false,
            }
            i += 1;
        }
    }

    /// Whether the token `n` ahead is a layer keyword followed by `[`.
    fn is_layer(&self, n: usize) -> bool {
        matches!(self.peek_at(n), Tok::Word(w) if layer_keyword(w).is_some())
            && *self.peek_at(n + 1) == Tok::LBrack
    }

    /// `arth relop arth`. A field at a constant offset, maybe masked by a
    /// constant, compared with a constant, all written as numbers (or
    /// named values), is a [`Compare`], which merges with other filters'
    /// tests; anything computed is a [`Relation`], folded in lowering as
    /// libpcap's optimizer folds it (it folds written numbers earlier than
    /// computed ones, which decides short packets' verdicts).
    fn relation(&mut self, column: usize) -> Result<Primitive, Error> {
        self.loads = 0;
        let mut lhs = Vec::new();
        self.arith(&mut lhs)?;
        let op = match self.peek() {
            Tok::Rel(op) => *op,
            _ => return Err(self.unexpected("a relational operator (=, !=, <, <=, >, >=)")),
        };
        self.pos += 1;
        let mut rhs = Vec::new();
        self.arith(&mut rhs)?;
        let field = match lhs[..] {
            [Arith::Num(offset), Arith::Load(layer, size)] => Some((offset, layer, size, None)),
            [
                Arith::Num(offset),
                Arith::Load(layer, size),
                Arith::Num(m),
                Arith::Bin(ArithOp::And),
            ] => Some((offset, layer, size, Some(m))),
            _ => None,
        };
        if let (Some((offset, layer, size, mask)), [Arith::Num(value)]) = (field, &rhs[..])
            && offset <= 0xffff
        {
            return Ok(Primitive::Compare(Compare {
                layer,
                offset,
                size,
                mask,
                op,
                value: *value,
            }));
        }
        Ok(Primitive::Relation(Box::new(Relation {
            lhs,
            op,
            rhs,
            column,
        })))
    }

    /// One arithmetic expression, appended to `out` in postfix order, by
    /// libpcap's precedences (`grammar.y`): `|` below `&` below `<<` `>>`
    /// below `+` `-` below `*` `/`, all left-associative; unary minus
    /// binds tightest. `%` and `^` have no precedence there, so yacc
    /// shifts them: each takes the operand just before it and everything
    /// after it as its right operand (`a + b % c + d` is `a + (b % (c +
    /// d))`). Each level of parentheses, index brackets, unary minus, `%`
    /// and `^` counts against the nesting limit; a flat chain is a loop.
    fn arith(&mut self, out: &mut Vec<Arith>) -> Result<(), Error> {
        self.arith_level(out, 0)
    }

    fn arith_level(&mut self, out: &mut Vec<Arith>, level: u8) -> Result<(), Error> {
        if level == 5 {
            return self.unary(out);
        }
        self.arith_level(out, level + 1)?;
        loop {
            let op = match (level, self.peek()) {
                (0, Tok::Arith("|")) => ArithOp::Or,
                (1, Tok::Amp) => ArithOp::And,
                (2, Tok::Arith("<<")) => ArithOp::Shl,
                (2, Tok::Arith(">>")) => ArithOp::Shr,
                (3, Tok::Arith("+")) => ArithOp::Add,
                (3, Tok::Minus) => ArithOp::Sub,
                (4, Tok::Arith("*")) => ArithOp::Mul,
                (4, Tok::Slash) => ArithOp::Div,
                _ => return Ok(()),
            };
            let column = self.col();
            self.pos += 1;
            let right = out.len();
            self.arith_level(out, level + 1)?;
            check_divisor(op, out[right], column)?;
            out.push(Arith::Bin(op));
        }
    }

    /// `-unary`, or an operand with an optional `% arth` or `^ arth`.
    fn unary(&mut self, out: &mut Vec<Arith>) -> Result<(), Error> {
        if *self.peek() == Tok::Minus {
            self.enter(self.col())?;
            self.pos += 1;
            self.unary(out)?;
            self.depth -= 1;
            out.push(Arith::Neg);
            return Ok(());
        }
        self.operand(out)?;
        let op = match self.peek() {
            Tok::Arith("%") => ArithOp::Mod,
            Tok::Arith("^") => ArithOp::Xor,
            _ => return Ok(()),
        };
        let column = self.col();
        self.enter(column)?;
        self.pos += 1;
        let right = out.len();
        self.arith(out)?;
        self.depth -= 1;
        check_divisor(op, out[right], column)?;
        out.push(Arith::Bin(op));
        Ok(())
    }

    /// A number, a named value, `len`, `layer[index[:size]]` or a
    /// parenthesized expression.
    fn operand(&mut self, out: &mut Vec<Arith>) -> Result<(), Error> {
        let column = self.col();
        match self.peek().clone() {
            Tok::Num(n, _) => {
                self.pos += 1;
                out.push(Arith::Num(n));
            }
            Tok::LParen => {
                self.enter(column)?;
                self.pos += 1;
                self.arith(out)?;
                self.expect(Tok::RParen, "\")\"")?;
                self.depth -= 1;
            }
            Tok::Word(w) if w == "len" => {
                self.pos += 1;
                out.push(Arith::Len);
            }
            Tok::Word(w) if named_value(&w).is_some() => {
                self.pos += 1;
                out.push(Arith::Num(named_value(&w).unwrap_or(0)));
            }
            Tok::Word(w) if self.is_layer(0) => {
                let layer = layer_keyword(&w).unwrap_or(Proto::Ether);
                self.pos += 2;
                // A computed index nests (`ip[ip[ip[...]]]`); a number
                // alone does not.
                let computed = !matches!(
                    (self.peek(), self.peek_at(1)),
                    (Tok::Num(..), Tok::Colon | Tok::RBrack)
                );
                if computed {
                    self.enter(column)?;
                }
                if self.loads > 0 {
                    self.primitive(column)?;
                }
                self.loads += 1;
                self.arith(out)?;
                let size = if *self.peek() == Tok::Colon {
                    self.pos += 1;
                    let c = self.col();
                    match self.bump().0 {
                        Tok::Num(1, _) => Size::B,
                        Tok::Num(2, _) => Size::H,
                        Tok::Num(4, _) => Size::W,
                        Tok::Num(_, text) => {
                            return Err(Error::BadNumber {
                                column: c,
                                text,
                                reason: "a field size must be 1, 2 or 4",
                            });
                        }
                        _ => {
                            self.pos -= 1;
                            return Err(self.unexpected("a field size (1, 2 or 4)"));
                        }
                    }
                } else {
                    Size::B
                };
                self.expect(Tok::RBrack, "\"]\"")?;
                if computed {
                    self.depth -= 1;
                }
                out.push(Arith::Load(layer, size));
            }
            Tok::Word(w)
                if UNSUPPORTED.contains(&w.as_str()) && *self.peek_at(1) == Tok::LBrack =>
            {
                return Err(Error::Unsupported {
                    column,
                    feature: format!("the \"{w}\" layer in a comparison"),
                });
            }
            _ => {
                return Err(
                    self.unexpected("a number, len, a named value, a packet field or \"(\"")
                );
            }
        }
        Ok(())
    }
}

/// libpcap's code generator refuses a division or modulus whose right
/// operand's code starts with the constant 0, and a shift whose right
/// operand's starts with a constant above 31 (`gen_arth` looks at the
/// first instruction only, so `x / (0 - y)` is refused too). `first` is
/// the first postfix step of the right operand, its leftmost leaf.
fn check_divisor(op: ArithOp, first: Arith, column: usize) -> Result<(), Error> {
    let reason = match (op, first) {
        (ArithOp::Div, Arith::Num(0)) => "division by zero",
        (ArithOp::Mod, Arith::Num(0)) => "modulus by zero",
        (ArithOp::Shl | ArithOp::Shr, Arith::Num(n)) if n > 31 => "shift by more than 31 bits",
        _ => return Ok(()),
    };
    Err(Error::Arithmetic { column, reason })
}

/// libpcap's named values (its scanner's table): ICMP, ICMPv6 and TCP
/// header offsets, ICMP and ICMPv6 types and the TCP flag bits.
fn named_value(w: &str) -> Option<u32> {
    Some(match w {
        "icmptype" | "icmp6type" => 0,
        "icmpcode" | "icmp6code" => 1,
        "tcpflags" => 13,
        "icmp-echoreply" => 0,
        "icmp-unreach" => 3,
        "icmp-sourcequench" => 4,
        "icmp-redirect" => 5,
        "icmp-echo" => 8,
        "icmp-routeradvert" => 9,
        "icmp-routersolicit" => 10,
        "icmp-timxceed" => 11,
        "icmp-paramprob" => 12,
        "icmp-tstamp" => 13,
        "icmp-tstampreply" => 14,
        "icmp-ireq" => 15,
        "icmp-ireqreply" => 16,
        "icmp-maskreq" => 17,
        "icmp-maskreply" => 18,
        "icmp6-destinationunreach" => 1,
        "icmp6-packettoobig" => 2,
        "icmp6-timeexceeded" => 3,
        "icmp6-parameterproblem" => 4,
        "icmp6-echo" => 128,
        "icmp6-echoreply" => 129,
        "icmp6-multicastlistenerquery" => 130,
        "icmp6-multicastlistenerreportv1" => 131,
        "icmp6-multicastlistenerdone" => 132,
        "icmp6-routersolicit" => 133,
        "icmp6-routeradvert" => 134,
        "icmp6-neighborsolicit" => 135,
        "icmp6-neighboradvert" => 136,
        "icmp6-redirect" => 137,
        "icmp6-routerrenum" => 138,
        "icmp6-nodeinformationquery" => 139,
        "icmp6-nodeinformationresponse" => 140,
        "icmp6-ineighbordiscoverysolicit" => 141,
        "icmp6-ineighbordiscoveryadvert" => 142,
        "icmp6-multicastlistenerreportv2" => 143,
        "icmp6-homeagentdiscoveryrequest" => 144,
        "icmp6-homeagentdiscoveryreply" => 145,
        "icmp6-mobileprefixsolicit" => 146,
        "icmp6-mobileprefixadvert" => 147,
        "icmp6-certpathsolicit" => 148,
        "icmp6-certpathadvert" => 149,
        "icmp6-multicastrouteradvert" => 151,
        "icmp6-multicastroutersolicit" => 152,
        "icmp6-multicastrouterterm" => 153,
        "tcp-fin" => 0x01,
        "tcp-syn" => 0x02,
        "tcp-rst" => 0x04,
        "tcp-push" => 0x08,
        "tcp-ack" => 0x10,
        "tcp-urg" => 0x20,
        "tcp-ece" => 0x40,
        "tcp-cwr" => 0x80,
        _ => return None,
    })
}

/// A word that starts an arithmetic operand on its own.
fn arith_word(w: &str) -> bool {
    w == "len" || named_value(w).is_some()
}

/// The layer keywords a packet field can be read from (`tcp[...]`).
fn layer_keyword(w: &str) -> Option<Proto> {
    proto_keyword(w).or(match w {
        "vrrp" => Some(Proto::Vrrp),
        "carp" => Some(Proto::Carp),
        "icmp6" => Some(Proto::Icmp6),
        _ => None,
    })
}

impl ArithOp {
    /// The operator as written.
    pub fn symbol(self) -> &'static str {
        match self {
            ArithOp::Add => "+",
            ArithOp::Sub => "-",
            ArithOp::Mul => "*",
            ArithOp::Div => "/",
            ArithOp::Mod => "%",
            ArithOp::And => "&",
            ArithOp::Or => "|",
            ArithOp::Xor => "^",
            ArithOp::Shl => "<<",
            ArithOp::Shr => ">>",
        }
    }
}

/// An expression's text, every operator parenthesized, from its postfix
/// steps (a stack of texts: no recursion).
pub fn arith_text(ops: &[Arith]) -> String {
    let mut stack: Vec<String> = Vec::new();
    for op in ops {
        let t = match *op {
            Arith::Num(n) => n.to_string(),
            Arith::Len => "len".into(),
            Arith::Load(layer, size) => {
                let i = stack.pop().unwrap_or_default();
                match size {
                    Size::B => format!("{layer}[{i}]"),
                    _ => format!("{layer}[{i}:{}]", size as u8),
                }
            }
            Arith::Neg => format!("-({})", stack.pop().unwrap_or_default()),
            Arith::Bin(b) => {
                let r = stack.pop().unwrap_or_default();
                let l = stack.pop().unwrap_or_default();
                format!("({l} {} {r})", b.symbol())
            }
        };
        stack.push(t);
    }
    stack.pop().unwrap_or_default()
}

impl fmt::Display for Relation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {}",
            arith_text(&self.lhs),
            self.op,
            arith_text(&self.rhs)
        )
    }
}

fn is_head_word(w: &str) -> bool {
    matches!(
        w,
        "src" | "dst" | "host" | "net" | "port" | "portrange" | "gateway"
    )
}

fn is_keyword(w: &str) -> bool {
    is_head_word(w)
        || proto_keyword(w).is_some()
        || matches!(
            w,
            "and"
                | "or"
                | "not"
                | "proto"
                | "mask"
                | "len"
                | "less"
                | "greater"
                | "pppoed"
                | "pppoes"
                | "llc"
        )
        || named_value(w).is_some()
        || UNSUPPORTED.contains(&w)
        || is_iso_word(w)
}

// ---------------------------------------------------------------- display

impl Proto {
    /// The keyword.
    pub fn name(self) -> &'static str {
        match self {
            Proto::Ether => "ether",
            Proto::Ip => "ip",
            Proto::Ip6 => "ip6",
            Proto::Arp => "arp",
            Proto::Rarp => "rarp",
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
            Proto::Icmp => "icmp",
            Proto::Vrrp => "vrrp",
            Proto::Carp => "carp",
            Proto::Icmp6 => "icmp6",
            Proto::Sctp => "sctp",
        }
    }
}

impl fmt::Display for Proto {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for RelOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RelOp::Eq => "=",
            RelOp::Ne => "!=",
            RelOp::Lt => "<",
            RelOp::Le => "<=",
            RelOp::Gt => ">",
            RelOp::Ge => ">=",
        })
    }
}

/// Why `p` cannot follow a `pppoes`, if it cannot: libpcap's refusals on
/// the PPP link layer it leaves (its messages), and what dpf leaves out
/// there (`ether[...]`, which libpcap reads from the PPP header, and ISO,
/// which it reads in PPP's OSI form).
fn ppp_refusal(p: &Primitive, column: usize) -> Result<(), Error> {
    let bad = |message: &str| {
        Err(Error::BadQualifier {
            column,
            message: message.into(),
        })
    };
    let unsupported = |feature: &str| {
        Err(Error::Unsupported {
            column,
            feature: format!("{feature} after \"pppoes\""),
        })
    };
    match p {
        Primitive::Llc(_) => bad("'llc' not supported for PPP"),
        Primitive::Broadcast => bad("not a broadcast link"),
        Primitive::Multicast => bad(
            "link-layer multicast filters supported only on ethernet/FDDI/token ring/ARCNET/\
             802.11/ATM LANE/Fibre Channel",
        ),
        Primitive::EtherHost { .. } => bad(
            "ethernet addresses supported only on ethernet/FDDI/token ring/802.11/ATM LANE/\
             Fibre Channel",
        ),
        Primitive::Compare(Compare {
            layer: Proto::Ether,
            ..
        }) => unsupported("\"ether[...]\" (libpcap reads the PPP header there)"),
        Primitive::Relation(r) if r.loads_from(|l| l == Proto::Ether) => {
            unsupported("\"ether[...]\" (libpcap reads the PPP header there)")
        }
        Primitive::IsoProto(_) | Primitive::IsisProto(_) | Primitive::IsisPdus(_) => {
            unsupported("ISO and IS-IS")
        }
        _ => Ok(()),
    }
}

/// A dotted IPv4 address (or the first parts of one, promoted to the
/// top of the address), each part a byte.
fn ipv4(parts: &[u32], text: &str, column: usize) -> Result<u32, Error> {
    if parts.iter().any(|&p| p > 255) {
        return Err(Error::BadAddress {
            column,
            text: text.to_string(),
            reason: "a part is greater than 255",
        });
    }
    Ok(parts
        .iter()
        .enumerate()
        .fold(0u32, |a, (i, &p)| a | (p << (24 - 8 * i))))
}

fn quad(a: u32) -> String {
    let b = a.to_be_bytes();
    format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3])
}

/// The qualifier prefix: `[proto ][dir ]`.
fn prefix(proto: Option<Proto>, dir: Dir) -> String {
    let mut s = String::new();
    if let Some(p) = proto {
        s.push_str(p.name());
        s.push(' ');
    }
    s.push_str(match dir {
        Dir::SrcOrDst => "",
        Dir::Src => "src ",
        Dir::Dst => "dst ",
        Dir::SrcAndDst => "src and dst ",
    });
    s
}

impl fmt::Display for Primitive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Primitive::Proto(p) => write!(f, "{p}"),
            Primitive::EtherProto(n) => write!(f, "ether proto {n:#06x}"),
            Primitive::IpProto(n) => write!(f, "ip proto {n}"),
            Primitive::Ip6Proto(n) => write!(f, "ip6 proto {n}"),
            Primitive::AnyProto(n) => write!(f, "proto {n}"),
            Primitive::Broadcast => write!(f, "ether broadcast"),
            Primitive::Multicast => write!(f, "ether multicast"),
            Primitive::IpMulticast => write!(f, "ip multicast"),
            Primitive::Ip6Multicast => write!(f, "ip6 multicast"),
            Primitive::Mpls { label: None, .. } => write!(f, "mpls"),
            Primitive::Mpls { label: Some(l), .. } => write!(f, "mpls {l}"),
            Primitive::Vlan { id: None, .. } => write!(f, "vlan"),
            Primitive::Vlan { id: Some(id), .. } => write!(f, "vlan {id}"),
            Primitive::Shifted { ref inner, .. } => write!(f, "{inner}"),
            Primitive::Geneve { vni: None, .. } => write!(f, "geneve"),
            Primitive::Geneve { vni: Some(v), .. } => write!(f, "geneve {v}"),
            Primitive::InGeneve { ref inner, .. } => write!(f, "{inner}"),
            Primitive::IsoProto(n) => write!(f, "iso proto {n:#04x}"),
            Primitive::IsisProto(n) => write!(f, "isis proto {n:#04x}"),
            Primitive::IsisPdus(set) => write!(f, "{}", set.name()),
            Primitive::Llc(None) => write!(f, "llc"),
            Primitive::Llc(Some(k)) => write!(f, "llc {}", k.name()),
            Primitive::Pppoes { id: None } => write!(f, "pppoes"),
            Primitive::Pppoes { id: Some(id) } => write!(f, "pppoes {id}"),
            Primitive::EtherHost { dir, addr } => {
                let a = addr.map(|b| format!("{b:02x}")).join(":");
                write!(f, "{}host {a}", prefix(Some(Proto::Ether), dir))
            }
            Primitive::Host { proto, dir, addr } => {
                write!(f, "{}host {}", prefix(proto, dir), quad(addr))
            }
            Primitive::DecnetHost { dir, addr } => {
                let (area, node) = (addr >> 10, addr & 0x3ff);
                write!(f, "decnet {}host {area}.{node}", prefix(None, dir))
            }
            Primitive::Host6 { dir, addr } => {
                let a = std::net::Ipv6Addr::from(addr);
                write!(f, "{}host {a}", prefix(None, dir))
            }
            Primitive::Net6 { dir, addr, len } => {
                let a = std::net::Ipv6Addr::from(addr);
                write!(f, "{}net {a}/{len}", prefix(None, dir))
            }
            Primitive::Net {
                proto,
                dir,
                addr,
                mask,
            } => {
                let p = prefix(proto, dir);
                if mask.leading_ones() + mask.trailing_zeros() == 32 {
                    write!(f, "{p}net {}/{}", quad(addr), mask.leading_ones())
                } else {
                    write!(f, "{p}net {} mask {}", quad(addr), quad(mask))
                }
            }
            Primitive::Port {
                proto,
                dir,
                first,
                last,
                range,
            } => {
                let p = prefix(proto, dir);
                if range {
                    write!(f, "{p}portrange {first}-{last}")
                } else {
                    write!(f, "{p}port {first}")
                }
            }
            Primitive::Compare(c) => write!(f, "{c}"),
            Primitive::Relation(ref r) => write!(f, "{r}"),
        }
    }
}

impl fmt::Display for Compare {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[{}", self.layer, self.offset)?;
        if self.size != Size::B {
            write!(f, ":{}", self.size as u8)?;
        }
        f.write_str("]")?;
        if let Some(m) = self.mask {
            write!(f, " & {m:#x}")?;
        }
        write!(f, " {} {}", self.op, self.value)
    }
}

impl fmt::Display for Expr {
    /// The canonical text: a filter that parses back to the same tree,
    /// with parentheses around every binary operand that is itself binary
    /// and every binary operand of `not`. The tree is walked with a heap
    /// stack, so a long chain takes no call stack.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        enum Item<'a> {
            Expr(&'a Expr),
            Text(&'static str),
        }
        /// Pushes a binary operand, parenthesized unless left association
        /// makes it safe (a left operand of the same operator).
        fn operand<'a>(stack: &mut Vec<Item<'a>>, e: &'a Expr, parent_and: bool, left: bool) {
            let bare = match e {
                Expr::And(..) => left && parent_and,
                Expr::Or(..) => left && !parent_and,
                _ => true,
            };
            if bare {
                stack.push(Item::Expr(e));
            } else {
                stack.extend([Item::Text(")"), Item::Expr(e), Item::Text("(")]);
            }
        }
        // Items are popped in reading order, so each is pushed reversed.
        let mut stack = vec![Item::Expr(self)];
        while let Some(item) = stack.pop() {
            let e = match item {
                Item::Text(t) => {
                    f.write_str(t)?;
                    continue;
                }
                Item::Expr(e) => e,
            };
            match e {
                Expr::And(a, b) | Expr::Or(a, b) => {
                    let and = matches!(e, Expr::And(..));
                    operand(&mut stack, b, and, false);
                    stack.push(Item::Text(if and { " and " } else { " or " }));
                    operand(&mut stack, a, and, true);
                }
                Expr::Not(x) => match **x {
                    Expr::And(..) | Expr::Or(..) => {
                        stack.extend([Item::Text(")"), Item::Expr(x), Item::Text("not (")]);
                    }
                    _ => stack.extend([Item::Expr(x), Item::Text("not ")]),
                },
                Expr::Prim(p) => write!(f, "{p}")?,
            }
        }
        Ok(())
    }
}

impl Drop for Expr {
    /// Dismantles the tree with a heap stack: the compiler's drop of a
    /// long `and`/`or` chain (a left-deep tree) would recurse once per
    /// operator.
    fn drop(&mut self) {
        fn detach(e: &mut Expr, stack: &mut Vec<Expr>) {
            let mut take = |x: &mut Box<Expr>| {
                if !matches!(**x, Expr::Prim(_)) {
                    stack.push(std::mem::replace(
                        &mut **x,
                        Expr::Prim(Primitive::Proto(Proto::Ip)),
                    ));
                }
            };
            match e {
                Expr::And(a, b) | Expr::Or(a, b) => {
                    take(a);
                    take(b);
                }
                Expr::Not(a) => take(a),
                Expr::Prim(_) => {}
            }
        }
        let mut stack = Vec::new();
        detach(self, &mut stack);
        while let Some(mut e) = stack.pop() {
            detach(&mut e, &mut stack);
        }
    }
}

/// The ports a name stands for after `port` (a service name) or
/// `portrange` (`name-name`, `name-N`: each side a service name or a
/// number), as libpcap's `pcap_nametoport` and `pcap_nametoportrange`
/// resolve them: (first, last, the one transport they are restricted to).
/// The two sides of a range keep a restriction only if they share it.
fn resolve_ports(
    name: &str,
    range: bool,
    column: usize,
) -> Result<(u16, u16, Option<Proto>), Error> {
    if !range {
        let (p, real) = resolve_port(name, column)?;
        return Ok((p, p, real));
    }
    let Some((a, b)) = name.split_once('-') else {
        return Err(Error::Syntax {
            column,
            expected: "a range of ports, N-M or name-name".into(),
            found: format!("\"{name}\""),
        });
    };
    let ((first, r1), (last, r2)) = (resolve_port(a, column)?, resolve_port(b, column)?);
    Ok((first, last, if r1 == r2 { r1 } else { None }))
}

/// One side of a port range, or a port: a number (every transport) or a
/// service name.
fn resolve_port(side: &str, column: usize) -> Result<(u16, Option<Proto>), Error> {
    if !side.is_empty() && side.bytes().all(|b| b.is_ascii_digit()) {
        return side
            .parse()
            .map(|n| (n, None))
            .map_err(|_| Error::BadNumber {
                column,
                text: side.to_string(),
                reason: "a port number is at most 65535",
            });
    }
    crate::services::resolve(side).ok_or_else(|| Error::UnknownPort {
        column,
        name: side.to_string(),
    })
}
