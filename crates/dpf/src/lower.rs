//! Lowering a filter expression to a decision graph ([`Program`]) with
//! libpcap's exact semantics for DLT_EN10MB.
//!
//! Each primitive expands to the tests libpcap's `gencode.c` generates for
//! it, in the same order (the order matters: a load past the end of the
//! packet rejects the packet, so which test runs first decides the verdict
//! of a truncated packet). For example `tcp` is "IPv4 with protocol 6, or
//! IPv6 with next header 6, or IPv6 with a fragment header (44) followed
//! by 6", and `port 80` checks IPv6 (SCTP, TCP, UDP at fixed offsets 54
//! and 56) before IPv4 (each protocol, then "not a fragment", then the
//! ports behind the IHL-sized header). `docs/dpf.md` lists every
//! expansion.
//!
//! The graph is built back to front, the way libpcap backpatches jumps:
//! `lower(expr, then, else)` returns the block that decides `expr` and
//! continues at `then` or `else`. Then it is simplified the way libpcap's
//! optimizer (`optimize.c`) simplifies the same code, because the
//! optimizer changes verdicts on short packets: a test it removes no
//! longer loads, and one it keeps still rejects a packet too short for
//! its load.
//!
//! 1. First pass (branch movement, `opt_loop(.., 0)`), in rounds that
//!    each compute dominators first: an edge into a block whose outcome
//!    the edges dominating it decide skips the block (`fold_edge`: the
//!    same test of the same accumulator value has the same outcome; after
//!    `A = a` held, `A = b` fails), and an edge into a block whose two
//!    edges agree skips it; then a test of the value the predecessors
//!    left loaded is pulled up an or- or and-chain (`or_pullup`,
//!    `and_pullup`). A user's comparison (`ip[9] = 6`) loads through the
//!    index register, so it never shares an accumulator value with a
//!    primitive's test, while a field compared with a number and with a
//!    computed value share one (`Acc::Field`). In the first round a
//!    user's equality is still `sub x; jeq #0`, its accumulator the
//!    difference of its sides (`Key::Diff`), and two numbers compared
//!    are decided by the peephole in that round (`>`, `>=`) or the next
//!    (`=`). A primitive's `and #m; jeq #0` is `jset #m` here,
//!    and `jset #0` never holds, from the first round's edge moves on.
//!    The pass ends at a fixed point, or, as libpcap's loop detection
//!    ends it, after 100 rounds in a row that only moved edges (some
//!    filters' edges move in a cycle).
//! 2. Second pass (statements, `opt_loop(.., 1)`), which moves no edges:
//!    a user's comparison masked with 0 has a constant accumulator, so
//!    its load dies and its jump goes one way; `& m = 0` becomes
//!    `jset #m`, and `jset #0xffffffff` always holds (its load stays).
//! 3. Identical blocks merge (`intern_blocks`). A test whose edges now
//!    agree stays, as a bounds check (`then == els`). `opt_root` skips
//!    such tests from the root: ending in a verdict, the program is that
//!    verdict; ending in a test, only the root block's load is kept.
//!
//! A filter with a `geneve` skips all of this: libpcap 1.10 turns its
//! optimizer off for it (`gen_geneve_offsets` sets `no_optimize`), so its
//! program is gencode's blocks as they are (`unoptimized`), and what
//! follows the `geneve` is read at the carried packet's offsets
//! (`in_geneve`, [`crate::ir::Geneve`]).
//!
//! Not modelled: `use_conflict` (gencode's blocks never depend on a
//! register another block set) and the second pass's removal of reloads
//! (which could keep two otherwise identical blocks apart). The
//! differential test (`tests/libpcap.rs`) is the check that this is
//! enough.

use std::collections::HashMap;
use std::fmt::Write as _;

use crate::error::Error;
use crate::ir::{
    ACCEPT, Base, Cmp, Field, Geneve, GeneveLayer, LoadBase, Node, NodeId, Op, Program, REJECT,
    Size, Test,
};
use crate::syntax::{Arith, ArithOp, Compare, Dir, Expr, Outer, Primitive, Proto, RelOp, Relation};

/// What libpcap's optimizer knows a test by while it threads jumps (its
/// first pass, before statements are simplified): the value in the
/// accumulator and the jump. Two tests with equal keys have the same
/// outcome; after `A = a` held, `A = b` fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Key {
    /// A test as gencode emits it for a primitive: an absolute load (or
    /// the IHL-relative port load), an optional `and #mask`, a jump.
    Prim {
        field: Field,
        mask: u32,
        cmp: Cmp,
        value: u32,
    },
    /// A comparison written by the user (`ip[9] = 6`): the load is indexed
    /// by a constant in X, so it differs from every primitive's load;
    /// `ip[k]`, `ip6[k]`, `arp[k]` and `rarp[k]` (class 1) load the same
    /// value, as do `tcp[k]`, `udp[k]`, `icmp[k]` and `sctp[k]` (class 2);
    /// `ether[k]` is class 0, `icmp6[k]` class 3 (its `offset` is 54 +
    /// k). Each VLAN tag before the layer adds 4 to a class other than 0.
    Raw {
        class: u32,
        offset: u32,
        size: Size,
        mask: Option<u32>,
        cmp: Cmp,
        value: u32,
    },
    /// A comparison of a computed value (`len`, arithmetic): the left
    /// side's value (the accumulator; equal for equal expressions, as
    /// libpcap's value numbering makes them), the jump, and its operand:
    /// the constant `k`, or the right side's value `x` (BPF's `jxx x`).
    Arith {
        a: Acc,
        cmp: Cmp,
        k: u32,
        x: Option<u32>,
    },
    /// A user's equality in the first round of the first pass, before
    /// the peephole has merged gencode's `sub x` into the jump: the
    /// accumulator holds the left side `a` less the right side (the
    /// constant `k`, or the value `x`), and the jump is `jeq #0`. Two
    /// such tests decide each other only if both sides are the same:
    /// `len = 0` having held says nothing yet of `len = 42`.
    Diff { a: Acc, k: u32, x: Option<u32> },
}

impl Key {
    fn cmp(&self) -> Cmp {
        match *self {
            Key::Prim { cmp, .. } | Key::Raw { cmp, .. } | Key::Arith { cmp, .. } => cmp,
            Key::Diff { .. } => Cmp::Eq,
        }
    }

    fn value(&self) -> u32 {
        match *self {
            Key::Prim { value, .. } | Key::Raw { value, .. } => value,
            Key::Arith { k, .. } => k,
            Key::Diff { .. } => 0,
        }
    }

    /// The key a test has in round `round` of the first pass: a user's
    /// equality is [`Key::Diff`] in the first round, itself after.
    fn in_round(&self, round: u64) -> Key {
        match *self {
            Key::Raw {
                class,
                offset,
                size,
                mask,
                cmp: Cmp::Eq,
                value,
            } if round == 0 => Key::Diff {
                a: Acc::field(class, offset, size, mask),
                k: value,
                x: None,
            },
            Key::Arith {
                a,
                cmp: Cmp::Eq,
                k,
                x,
            } if round == 0 => Key::Diff { a, k, x },
            key => key,
        }
    }

    /// The key with its jump and operand cleared: two tests leave the
    /// same value in the accumulator exactly when these are equal.
    fn a_value(&self) -> Key {
        match *self {
            Key::Prim { field, mask, .. } => Key::Prim {
                field,
                mask,
                cmp: Cmp::Eq,
                value: 0,
            },
            // A field compared with a number leaves the value a computed
            // comparison of the same field leaves (`ether[14:2] > 4` and
            // `ether[14:2] >= ip[28:4]`): both load it through X.
            Key::Raw {
                class,
                offset,
                size,
                mask,
                ..
            } => Key::Arith {
                a: Acc::field(class, offset, size, mask),
                cmp: Cmp::Eq,
                k: 0,
                x: None,
            },
            Key::Arith { a, .. } => Key::Arith {
                a,
                cmp: Cmp::Eq,
                k: 0,
                x: None,
            },
            Key::Diff { .. } => *self,
        }
    }
}

/// The accumulator a computed comparison leaves, as libpcap's first pass
/// numbers it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Acc {
    /// A field read through the index register, `layer[offset:size]`
    /// (masked with `& mask`): the load gencode emits for a user's
    /// comparison, whether the other side is a number or computed.
    Field {
        base: LoadBase,
        offset: u32,
        size: Size,
        mask: Option<u32>,
    },
    /// Any other value, numbered by its steps ([`Values::side`]).
    Value(u32),
}

impl Acc {
    /// The field a [`Key::Raw`] of `class` and `offset` reads.
    fn field(class: u32, offset: u32, size: Size, mask: Option<u32>) -> Acc {
        let (base, offset) = match class % 4 {
            0 => (LoadBase::At(0), offset),
            1 => (LoadBase::At(14 + class - 1), offset),
            2 => (LoadBase::Transport(class - 2), offset),
            _ => (LoadBase::At(54 + class - 3), offset - 54),
        };
        Acc::Field {
            base,
            offset,
            size,
            mask,
        }
    }
}

/// What libpcap's second pass refuses in a comparison's arithmetic, and
/// the round of that pass in which it does: the block must be reachable
/// then. In round 0 that is every block the first pass left reachable; in
/// a later one, a constant comparison the second pass decided in an
/// earlier round ([`Leaf::decided_in`]) no longer leads to the blocks it
/// cut off.
#[derive(Clone, Copy, Debug)]
struct Refusal {
    reason: &'static str,
    round: u32,
}

/// What libpcap's peephole optimizer decides about a test's jump, and
/// when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Late {
    /// Nothing.
    Keep,
    /// The jump always goes one way (`holds`: the key's "holds" edge)
    /// from round `round` of the first pass on, after that round has
    /// computed dominators with the edges as they were: the first round
    /// (0) for `jset #0` and a comparison of two numbers with `>` or `>=`
    /// (`jgt x` with a constant X and A), the second (1) for two numbers
    /// with `=` (`sub x; jeq #0`: the first round's peephole merges the
    /// constant X into the jump, the second finds A constant).
    Early { holds: bool, round: u64 },
    /// The accumulator is a constant (`& 0`): the load is dead and the
    /// jump always goes one way (`true`: the key's "holds" edge).
    Constant(bool),
    /// The jump always goes one way (`jset #0xffffffff`) but the load
    /// stays, so a short packet is still rejected.
    Decided(bool),
}

/// One test as generated: the IR test, the optimizer's key for it, and
/// what the second pass decides. The key's "holds" edge is the IR test's
/// "holds" edge unless `invert` (`and #m; jeq #0` became `jset #m`).
#[derive(Clone, Copy, Debug)]
struct Leaf {
    test: Test,
    key: Key,
    invert: bool,
    late: Late,
    /// The round of libpcap's second pass in which a [`Late::Constant`]
    /// or [`Late::Decided`] jump goes one way: its constants are known in
    /// that round (a test the second pass refuses later no longer
    /// reaches what it cut off).
    decided_in: u32,
    /// The first rounds of libpcap's first pass in which its peephole
    /// rewrites this block's statements (0 to 2): each such round is
    /// progress to its loop detection, which otherwise ends the pass
    /// after 100 rounds of edge moves alone.
    peephole_rounds: u8,
    /// libpcap's optimizer refuses the filter if this test is still
    /// reachable when its second pass folds the arithmetic (a computed
    /// comparison with a constant zero divisor or an oversized shift):
    /// the column, and what and in which round of that pass.
    poison: Option<(usize, Refusal)>,
}

/// A condition over tests, before it becomes a graph.
#[derive(Clone, Debug)]
enum Cond {
    Test(Leaf),
    /// Decided by libpcap's first pass (its test and load disappear).
    Const(bool),
    Not(Box<Cond>),
    /// Left to right.
    And(Vec<Cond>),
    /// Left to right.
    Or(Vec<Cond>),
}

fn not(c: Cond) -> Cond {
    Cond::Not(Box::new(c))
}

const ETHERTYPE_IP: u32 = 0x0800;
const ETHERTYPE_ARP: u32 = 0x0806;
const ETHERTYPE_RARP: u32 = 0x8035;
const ETHERTYPE_IPV6: u32 = 0x86dd;
const ETHERTYPE_MPLS: u32 = 0x8847;
/// The largest 802.3 length field; a larger value is an Ethernet type.
const ETHERMTU: u32 = 1500;
/// The IPv6 fragment header's next-header number.
const IPPROTO_FRAGMENT: u32 = 44;

fn link(offset: u32, size: Size) -> Field {
    Field {
        base: Base::Link,
        offset,
        size,
    }
}

/// A primitive's test: `field & mask cmp value`.
fn prim(field: Field, mask: u32, cmp: Cmp, value: u32) -> Cond {
    let test = Test {
        field,
        mask,
        cmp,
        value,
    };
    Cond::Test(Leaf {
        test,
        key: Key::Prim {
            field,
            mask,
            cmp,
            value,
        },
        invert: false,
        late: Late::Keep,
        decided_in: 0,
        peephole_rounds: 0,
        poison: None,
    })
}

fn eq(field: Field, value: u32) -> Cond {
    prim(field, !0, Cmp::Eq, value)
}

/// A primitive's `field & mask = value` with gencode's `and #mask`: against
/// 0 the first pass turns it into `jset #mask` (with `jset #0` never
/// holding).
fn masked_eq(field: Field, mask: u32, value: u32) -> Cond {
    if mask == u32::MAX {
        eq(field, value)
    } else if value == 0 {
        let mut set = prim(field, !0, Cmp::Set, mask);
        if let Cond::Test(leaf) = &mut set {
            // `and #m; jeq #0` becomes `jset #m` in the first round.
            leaf.peephole_rounds = 1;
        }
        if mask == 0 {
            // `jset #0` never holds; the first pass's peephole decides it
            // right after computing the dominators of its first round.
            if let Cond::Test(leaf) = &mut set {
                leaf.late = Late::Early {
                    holds: false,
                    round: 0,
                };
            }
        }
        not(set)
    } else {
        prim(field, mask, Cmp::Eq, value)
    }
}

/// A comparison the user wrote, `field [& mask] op value`, as gencode
/// emits it and libpcap's optimizer leaves it. `class` and `offset` name
/// the load for the key (see [`Key::Raw`]).
fn relation(
    field: Field,
    class: u32,
    offset: u32,
    mask: Option<u32>,
    op: RelOp,
    value: u32,
) -> Cond {
    let (cmp, negate) = match op {
        RelOp::Eq => (Cmp::Eq, false),
        RelOp::Ne => (Cmp::Eq, true),
        RelOp::Gt => (Cmp::Gt, false),
        RelOp::Le => (Cmp::Gt, true),
        RelOp::Ge => (Cmp::Ge, false),
        RelOp::Lt => (Cmp::Ge, true),
    };
    let key = Key::Raw {
        class,
        offset,
        size: field.size,
        mask,
        cmp,
        value,
    };
    let m = mask.unwrap_or(!0);
    let mut leaf = Leaf {
        test: Test {
            field,
            mask: m,
            cmp,
            value,
        },
        key,
        invert: false,
        late: Late::Keep,
        decided_in: 0,
        // Its index, a constant, goes to X by `ld #k; st M; ldx M`: the
        // first round makes that `st M; tax`, the second `ldx #k; txa`.
        peephole_rounds: 2,
        poison: None,
    };
    if mask == Some(0) {
        // `and #0` makes A the constant 0: the load dies, the jump folds,
        // a round after `and x` became `and #0`.
        let holds = match cmp {
            Cmp::Eq => value == 0,
            Cmp::Gt => false,
            Cmp::Ge => value == 0,
            Cmp::Set => false,
        };
        leaf.late = Late::Constant(holds);
        leaf.decided_in = 1;
    } else if let (Some(m), Cmp::Eq, 0) = (mask, cmp, value) {
        // `and #m; jeq #0` becomes `jset #m` with the edges swapped; and
        // `jset #0xffffffff` is taken as always true, load kept.
        leaf.test = Test {
            field,
            mask: !0,
            cmp: Cmp::Set,
            value: m,
        };
        leaf.invert = true;
        if m == u32::MAX {
            leaf.late = Late::Decided(false);
            leaf.decided_in = 1;
        }
    }
    let c = Cond::Test(leaf);
    if negate { not(c) } else { c }
}

fn ether_type(t: u32) -> Cond {
    eq(link(12, Size::H), t)
}

/// IPv4 with protocol `p` (libpcap's `gen_proto` for `ip proto`).
fn ip_proto(p: u32) -> Cond {
    Cond::And(vec![ether_type(ETHERTYPE_IP), eq(link(23, Size::B), p)])
}

/// IPv6 with next header `p` directly or behind a fragment header
/// (libpcap's `gen_proto` for `ip6 proto`).
fn ip6_proto(p: u32) -> Cond {
    Cond::And(vec![
        ether_type(ETHERTYPE_IPV6),
        Cond::Or(vec![
            eq(link(20, Size::B), p),
            Cond::And(vec![
                eq(link(20, Size::B), IPPROTO_FRAGMENT),
                eq(link(54, Size::B), p),
            ]),
        ]),
    ])
}

/// libpcap's `tcp`/`udp`/`sctp`: IPv4 protocol `p`, or IPv6 next header
/// `p` directly or behind a fragment header.
fn transport_abbrev(p: u32) -> Cond {
    Cond::Or(vec![ip_proto(p), ip6_proto(p)])
}

fn proto_abbrev(p: Proto) -> Cond {
    match p {
        Proto::Ip => ether_type(ETHERTYPE_IP),
        Proto::Ip6 => ether_type(ETHERTYPE_IPV6),
        Proto::Arp => ether_type(ETHERTYPE_ARP),
        Proto::Rarp => ether_type(ETHERTYPE_RARP),
        Proto::Tcp => transport_abbrev(6),
        Proto::Udp => transport_abbrev(17),
        Proto::Sctp => transport_abbrev(132),
        Proto::Icmp => ip_proto(1),
        Proto::Vrrp | Proto::Carp => ip_proto(112),
        Proto::Icmp6 => ip6_proto(58),
        // The parser never makes `ether` alone a primitive.
        Proto::Ether => Cond::Const(true),
    }
}

fn ip_number(p: Proto) -> u32 {
    match p {
        Proto::Tcp => 6,
        Proto::Udp => 17,
        Proto::Sctp => 132,
        Proto::Icmp => 1,
        Proto::Vrrp | Proto::Carp => 112,
        _ => unreachable!("not a transport protocol"),
    }
}

/// IPv4 and not a fragment with a nonzero offset (libpcap's `gen_ipfrag`).
fn not_fragment() -> Cond {
    not(prim(link(20, Size::H), !0, Cmp::Set, 0x1fff))
}

/// A source/destination pair of one header, combined per the direction.
fn by_dir(dir: Dir, one: impl Fn(bool) -> Cond) -> Cond {
    match dir {
        Dir::Src => one(true),
        Dir::Dst => one(false),
        Dir::SrcOrDst => Cond::Or(vec![one(true), one(false)]),
        Dir::SrcAndDst => Cond::And(vec![one(true), one(false)]),
    }
}

/// `host`/`net`: IPv4 source 26 / destination 30, ARP and RARP sender 28
/// / target 38, each guarded by its Ethernet type, in that order.
fn host(proto: Option<Proto>, dir: Dir, addr: u32, mask: u32) -> Cond {
    let protos: &[(u32, u32, u32)] = match proto {
        None => &[
            (ETHERTYPE_IP, 26, 30),
            (ETHERTYPE_ARP, 28, 38),
            (ETHERTYPE_RARP, 28, 38),
        ],
        Some(Proto::Ip) => &[(ETHERTYPE_IP, 26, 30)],
        Some(Proto::Arp) => &[(ETHERTYPE_ARP, 28, 38)],
        Some(Proto::Rarp) => &[(ETHERTYPE_RARP, 28, 38)],
        Some(_) => unreachable!("rejected by the parser"),
    };
    Cond::Or(
        protos
            .iter()
            .map(|&(ty, src, dst)| {
                by_dir(dir, |is_src| {
                    let off = if is_src { src } else { dst };
                    Cond::And(vec![
                        ether_type(ty),
                        masked_eq(link(off, Size::W), mask, addr),
                    ])
                })
            })
            .collect(),
    )
}

/// `host`/`net` with an IPv6 address (libpcap's `gen_hostop6`): per
/// direction, the Ethernet type, then the source (22) or destination (38)
/// address's four words from the first, each under its part of the
/// prefix's mask. gencode emits all four; a word the prefix leaves out is
/// `and #0; jeq #0`, which the optimizer removes with its load (as an
/// IPv4 `net 0.0.0.0/0`'s, [`masked_eq`]).
fn host6(dir: Dir, addr: [u8; 16], len: u8) -> Cond {
    let mask = crate::syntax::mask6(len).to_be_bytes();
    by_dir(dir, |is_src| {
        let off = if is_src { 22 } else { 38 };
        let mut tests = vec![ether_type(ETHERTYPE_IPV6)];
        for w in 0..4 {
            let word = |b: &[u8; 16]| {
                u32::from_be_bytes([b[4 * w], b[4 * w + 1], b[4 * w + 2], b[4 * w + 3]])
            };
            tests.push(masked_eq(
                link(off + 4 * w as u32, Size::W),
                word(&mask),
                word(&addr),
            ));
        }
        Cond::And(tests)
    })
}

/// One port field: equal to `first`, or within `first..=last` for a range.
fn port_field(field: Field, first: u16, last: u16, range: bool) -> Cond {
    if range {
        Cond::And(vec![
            prim(field, !0, Cmp::Ge, first.into()),
            not(prim(field, !0, Cmp::Gt, last.into())),
        ])
    } else {
        eq(field, first.into())
    }
}

/// `port`/`portrange`: IPv6 first (next header at 20, ports at 54/56, no
/// extension headers), then IPv4 (protocol at 23, not a fragment, ports
/// behind the IHL-sized header), each for SCTP, TCP, UDP or the one named.
fn port(proto: Option<Proto>, dir: Dir, first: u16, last: u16, range: bool) -> Cond {
    let protos: Vec<u32> = match proto {
        None => vec![132, 6, 17],
        Some(p) => vec![ip_number(p)],
    };
    let ports = |src: Field, dst: Field| {
        by_dir(dir, |is_src| {
            port_field(if is_src { src } else { dst }, first, last, range)
        })
    };
    let v6 = Cond::And(vec![
        ether_type(ETHERTYPE_IPV6),
        Cond::Or(
            protos
                .iter()
                .map(|&p| {
                    Cond::And(vec![
                        eq(link(20, Size::B), p),
                        ports(link(54, Size::H), link(56, Size::H)),
                    ])
                })
                .collect(),
        ),
    ]);
    let tp = |offset| Field {
        base: Base::Transport,
        offset,
        size: Size::H,
    };
    let v4 = Cond::And(vec![
        ether_type(ETHERTYPE_IP),
        Cond::Or(
            protos
                .iter()
                .map(|&p| {
                    Cond::And(vec![
                        eq(link(23, Size::B), p),
                        not_fragment(),
                        ports(tp(0), tp(2)),
                    ])
                })
                .collect(),
        ),
    ]);
    Cond::Or(vec![v6, v4])
}

/// `layer[offset:size] & mask op value`, with libpcap's guards: the
/// layer's Ethernet type, and for a transport layer its protocol test and
/// "not a fragment".
fn compare(c: &Compare) -> Cond {
    let rel = |field, class| relation(field, class, c.offset, c.mask, c.op, c.value);
    let net = |ty| Cond::And(vec![ether_type(ty), rel(link(14 + c.offset, c.size), 1)]);
    // `guards`, "not a fragment", then the field in the transport header.
    let transport = |mut guards: Vec<Cond>| {
        guards.push(not_fragment());
        guards.push(rel(
            Field {
                base: Base::Transport,
                offset: c.offset,
                size: c.size,
            },
            2,
        ));
        Cond::And(guards)
    };
    match c.layer {
        Proto::Ether => rel(link(c.offset, c.size), 0),
        Proto::Ip => net(ETHERTYPE_IP),
        Proto::Arp => net(ETHERTYPE_ARP),
        Proto::Rarp => net(ETHERTYPE_RARP),
        Proto::Ip6 => net(ETHERTYPE_IPV6),
        // gen_load for Q_ICMPV6 in 1.10: IPv6, next header 58 (no
        // extension headers), the header at the fixed offset 14 + 40.
        Proto::Icmp6 => Cond::And(vec![
            ether_type(ETHERTYPE_IPV6),
            eq(link(20, Size::B), 58),
            relation(
                link(54 + c.offset, c.size),
                3,
                54 + c.offset,
                c.mask,
                c.op,
                c.value,
            ),
        ]),
        // gen_load for Q_VRRP and Q_CARP: gen_proto_abbrev's `ip proto
        // 112`, then as a transport header.
        Proto::Vrrp | Proto::Carp => transport(vec![ip_proto(112)]),
        Proto::Tcp | Proto::Udp | Proto::Sctp | Proto::Icmp => {
            transport(vec![ether_type(ETHERTYPE_IP), proto_abbrev(c.layer)])
        }
    }
}

fn primitive(p: &Primitive, values: &mut Values) -> Cond {
    match *p {
        Primitive::Proto(p) => proto_abbrev(p),
        Primitive::IpProto(n) => ip_proto(n),
        Primitive::Ip6Proto(n) => ip6_proto(n),
        // libpcap's gen_proto for Q_DEFAULT: IPv4 or IPv6.
        Primitive::AnyProto(n) => Cond::Or(vec![ip_proto(n), ip6_proto(n)]),
        // libpcap's gen_bcmp: the last four bytes of the destination, then
        // the first two (a frame shorter than 6 bytes fails the first load).
        Primitive::Broadcast => Cond::And(vec![
            eq(link(2, Size::W), 0xffff_ffff),
            eq(link(0, Size::H), 0xffff),
        ]),
        // libpcap's gen_ehostop and gen_bcmp: the last four bytes of the
        // address, then the first two; source at 6, destination at 0.
        Primitive::EtherHost { dir, addr } => by_dir(dir, |is_src| {
            let off = if is_src { 6 } else { 0 };
            let [a, b, c, d, e, g] = addr;
            Cond::And(vec![
                eq(link(off + 2, Size::W), u32::from_be_bytes([c, d, e, g])),
                eq(link(off, Size::H), u32::from(u16::from_be_bytes([a, b]))),
            ])
        }),
        // libpcap's gen_mac_multicast: `jset #1` on the first byte.
        Primitive::Multicast => prim(link(0, Size::B), !0, Cmp::Set, 1),
        // libpcap's gen_multicast for `ip`: the destination's first byte
        // (offset 16 of the IPv4 header) at least 224.
        Primitive::IpMulticast => Cond::And(vec![
            ether_type(ETHERTYPE_IP),
            prim(link(30, Size::B), !0, Cmp::Ge, 224),
        ]),
        // libpcap's gen_multicast for `ip6`: the destination's first byte
        // (offset 24 of the IPv6 header) is 0xff.
        Primitive::Ip6Multicast => Cond::And(vec![
            ether_type(ETHERTYPE_IPV6),
            eq(link(38, Size::B), 0xff),
        ]),
        // gen_ether_linktype's AppleTalk cases: the EtherType, or an
        // 802.3 frame of 802.2 SNAP with Apple's OUI (AppleTalk) or the
        // zero one (AARP).
        Primitive::EtherProto(n @ (ETHERTYPE_ATALK | ETHERTYPE_AARP)) => Cond::Or(vec![
            ether_type(n),
            Cond::And(vec![
                length_at_12(),
                snap(if n == ETHERTYPE_ATALK { 0x08_0007 } else { 0 }, n),
            ]),
        ]),
        Primitive::EtherProto(n) if n > ETHERMTU => ether_type(n),
        // gen_ether_linktype's IPX case: Ethernet II, or in 802.3 SNAP,
        // the IPX SAP as DSAP, or Netware's raw 802.3 (0xffff).
        Primitive::EtherProto(LLCSAP_IPX) => Cond::Or(vec![
            ether_type(ETHERTYPE_IPX),
            Cond::And(vec![
                length_at_12(),
                Cond::Or(vec![
                    snap(0, ETHERTYPE_IPX),
                    eq(link(14, Size::B), LLCSAP_IPX),
                    eq(link(14, Size::H), 0xffff),
                ]),
            ]),
        ]),
        // libpcap's gen_llc_linktype for the ISO, IP and NetBEUI SAPs,
        // which always use 802.2: DSAP and SSAP both `n`.
        Primitive::EtherProto(n @ (0x06 | 0xf0 | 0xfe)) => sap_pair(n),
        // An 802.3 frame (length, not type, at 12) whose LLC DSAP is `n`.
        Primitive::EtherProto(n) => Cond::And(vec![length_at_12(), eq(link(14, Size::B), n)]),
        Primitive::IsoProto(n) => iso_proto(n),
        Primitive::IsisProto(n) => isis_proto(n),
        // gen_proto_abbrev_internal: each type a whole `isis proto`.
        Primitive::IsisPdus(set) => Cond::Or(set.types().iter().map(|&t| isis_proto(t)).collect()),
        Primitive::Host { proto, dir, addr } => host(proto, dir, addr, u32::MAX),
        Primitive::Net {
            proto,
            dir,
            addr,
            mask,
        } => host(proto, dir, addr, mask),
        Primitive::DecnetHost { dir, addr } => by_dir(dir, |is_src| decnet_host(is_src, addr)),
        Primitive::Host6 { dir, addr } => host6(dir, addr, 128),
        Primitive::Net6 { dir, addr, len } => host6(dir, addr, len),
        Primitive::Port {
            proto,
            dir,
            first,
            last,
            range,
        } => port(proto, dir, first, last, range),
        Primitive::Compare(ref c) => compare(c),
        Primitive::Relation(ref r) => relation_cond(r, values, 0),
        Primitive::Geneve { vni, outer, column } => {
            values.geneve = Some(column);
            geneve(vni, outer, values)
        }
        Primitive::InGeneve { outer, ref inner } => in_geneve(inner, outer, values),
        Primitive::Shifted {
            shift,
            labels,
            ppp,
            ref inner,
        } => {
            // gen_llc reads the link-layer type and the LLC header where
            // the tags leave them (OR_LINKTYPE, OR_LLC): labels do not
            // move them.
            if let (Primitive::Llc(_), true) = (&**inner, labels > 0) {
                return shift_cond(primitive(inner, values), shift, values);
            }
            let d = 4 * (shift + labels);
            let inner = if labels > 0 {
                below_mpls(inner)
            } else {
                (**inner).clone()
            };
            let c = match inner {
                Primitive::Relation(ref r) => relation_cond(r, values, d),
                // gen_linktype on PPP: one compare, whatever the type
                // (an 802.3 SAP too), of the PPP protocol (below).
                Primitive::EtherProto(n) if ppp => ether_type(n),
                ref p => primitive(p, values),
            };
            let c = if labels > 0 {
                over_mpls(c)
            } else if ppp {
                ppp_types(c)
            } else {
                c
            };
            shift_cond(c, shift + labels, values)
        }
        // gen_mpls: the first label's EtherType (where the link-layer
        // type is, after any tags), or the label above's bottom-of-stack
        // bit clear (`jset #1` on its third byte, two before this one);
        // then the label's 20 bits. Built at the unmoved offsets and moved
        // as the primitives after the tags and labels before it are.
        Primitive::Mpls {
            shift,
            ppp,
            depth,
            label,
        } => {
            let mut tests = vec![if depth == 0 && ppp {
                ether_type(PPP_MPLS_UCAST)
            } else if depth == 0 {
                ether_type(ETHERTYPE_MPLS)
            } else {
                masked_eq(link(12, Size::B), 1, 0)
            }];
            if let Some(l) = label {
                tests.push(masked_eq(link(14, Size::W), 0xffff_f000, l << 12));
            }
            shift_cond(Cond::And(tests), shift + depth, values)
        }
        // libpcap's gen_llc on Ethernet: a length (not a type) at 12 and
        // DSAP/SSAP not 0xffff (Netware's raw 802.3); then, for a kind,
        // its control byte (the LLC header's third byte) under its mask.
        Primitive::Llc(kind) => {
            let mut tests = vec![length_at_12(), not(eq(link(14, Size::H), 0xffff))];
            if let Some(k) = kind {
                let (mask, value) = k.control();
                tests.push(masked_eq(link(16, Size::B), mask.into(), value.into()));
            }
            Cond::And(tests)
        }
        // gen_pppoes: the EtherType, then `ld [14]; and #0xffff; jeq #id`.
        Primitive::Pppoes { id } => {
            let ty = ether_type(0x8864);
            match id {
                None => ty,
                Some(id) => Cond::And(vec![ty, masked_eq(link(14, Size::W), 0xffff, id.into())]),
            }
        }
        // gen_vlan_tpid_test (802.1Q, 802.1ad, QinQ, in that order), then
        // gen_vlan_vid_test on the tag's low 12 bits.
        Primitive::Vlan { shift, id } => {
            let at = 12 + 4 * shift;
            let tpid = Cond::Or(
                [0x8100, 0x88a8, 0x9100]
                    .into_iter()
                    .map(|t| eq(link(at, Size::H), t))
                    .collect(),
            );
            match id {
                None => tpid,
                Some(id) => Cond::And(vec![
                    tpid,
                    masked_eq(link(at + 2, Size::H), 0x0fff, id.into()),
                ]),
            }
        }
    }
}

/// An 802.3 frame: a length, not a type, at 12 (gencode's `gen_cmp_gt(..,
/// OR_LINKTYPE, .., ETHERMTU)` negated, before every LLC test).
fn length_at_12() -> Cond {
    not(prim(link(12, Size::H), !0, Cmp::Gt, ETHERMTU))
}

/// AppleTalk's EtherType and AARP's.
const ETHERTYPE_ATALK: u32 = 0x809b;
const ETHERTYPE_AARP: u32 = 0x80f3;
/// IPX's EtherType and LLC SAP.
const ETHERTYPE_IPX: u32 = 0x8137;
const LLCSAP_IPX: u32 = 0xe0;

/// libpcap's gen_snap: the 802.2 header of a SNAP frame (DSAP and SSAP
/// 0xaa, UI) with `oui` and `ptype`, eight bytes compared as gen_bcmp
/// does, the last four first.
fn snap(oui: u32, ptype: u32) -> Cond {
    Cond::And(vec![
        eq(link(18, Size::W), (oui & 0xffff) << 16 | ptype),
        eq(link(14, Size::W), 0xaaaa_0300 | oui >> 16),
    ])
}

/// An 802.3 frame (a length, not a type, at 12) whose DSAP and SSAP are
/// both `sap`: libpcap's gen_llc_linktype for the SAPs that always use
/// 802.2 (ISO, IP, NetBEUI).
fn sap_pair(sap: u32) -> Cond {
    Cond::And(vec![length_at_12(), eq(link(14, Size::H), sap << 8 | sap)])
}

/// libpcap's gen_proto for Q_ISO: the ISO SAP's link type, then the
/// network-layer protocol id, the byte after the three of the LLC header
/// (OR_LINKPL_NOSNAP).
fn iso_proto(n: u32) -> Cond {
    Cond::And(vec![sap_pair(0xfe), eq(link(17, Size::B), n)])
}

/// libpcap's gen_proto for Q_ISIS: ISO protocol 0x83, then the PDU type,
/// four bytes into the IS-IS header.
fn isis_proto(n: u32) -> Cond {
    Cond::And(vec![iso_proto(0x83), eq(link(21, Size::B), n)])
}

/// DECnet's EtherType.
const ETHERTYPE_DN: u32 = 0x6003;

/// libpcap's gen_dnhostop for one direction: DECnet, then the address in
/// each of the routing header's four layouts, as the flags byte (after the
/// two length bytes) tells them. A pad byte (0x81) may come first; a long
/// header (flags & 7 = 6) has the destination 7 bytes past the flags and
/// the source 15, a short one (2) at 1 and 3. The address is
/// little-endian, compared as libpcap does, byte-swapped in a big-endian
/// load; gen_or puts each layout in front of the ones before it, so the
/// short header without a pad is tested first.
fn decnet_host(is_src: bool, addr: u16) -> Cond {
    let (short, long) = if is_src { (3, 15) } else { (1, 7) };
    let addr = u32::from(addr.swap_bytes());
    let layout = |padded: bool, long_header: bool| {
        let (flags, at) = if long_header { (6, long) } else { (2, short) };
        let flags_test = if padded {
            masked_eq(link(16, Size::H), 0xff07, 0x8100 | flags)
        } else {
            masked_eq(link(16, Size::B), 0x7, flags)
        };
        let pad = u32::from(padded);
        Cond::And(vec![flags_test, eq(link(16 + pad + at, Size::H), addr)])
    };
    Cond::And(vec![
        ether_type(ETHERTYPE_DN),
        Cond::Or(vec![
            layout(false, false),
            layout(true, false),
            layout(false, true),
            layout(true, true),
        ]),
    ])
}

/// The computed values of one program ([`Program::values`]), each
/// interned once: equal expressions are one value, as libpcap's value
/// numbering makes them one.
#[derive(Default)]
struct Values {
    list: Vec<Vec<Op>>,
    index: HashMap<Vec<Op>, u32>,
    /// The identities of the sides of comparisons, for [`Key::Arith`].
    sides: HashMap<Vec<Op>, u32>,
    /// The filter is compiled without libpcap's optimizer (it has a
    /// `geneve`): a comparison's arithmetic is computed as written, with
    /// every load, and nothing is refused.
    raw: bool,
    /// The column of the filter's `geneve`, if it has one.
    geneve: Option<usize>,
}

impl Values {
    /// A number equal for equal expressions, for a comparison's key.
    fn side(&mut self, ops: &[Op]) -> u32 {
        let next = self.sides.len() as u32;
        *self.sides.entry(ops.to_vec()).or_insert(next)
    }

    fn intern(&mut self, ops: Vec<Op>) -> u32 {
        if let Some(&i) = self.index.get(&ops) {
            return i;
        }
        let i = self.list.len() as u32;
        self.list.push(ops.clone());
        self.index.insert(ops, i);
        i
    }
}

/// Where a load from `layer` reads, and libpcap's guards around it
/// (`gen_load`): the index's own guards `inner`, then the layer's
/// protocol tests; a transport layer is IPv4 first, then the index's
/// guards, then its protocol and "not a fragment".
///
/// The guards are built unshifted (the caller shifts them, see
/// [`shift_cond`]); the load's base is `d` bytes further on (`d / 4` VLAN
/// tags before it), except the link header's.
fn load_guards(layer: Proto, inner: Vec<Cond>, d: u32) -> (LoadBase, Vec<Cond>) {
    let mut g = inner;
    let base = match layer {
        Proto::Ether => LoadBase::At(0),
        Proto::Ip => {
            g.push(ether_type(ETHERTYPE_IP));
            LoadBase::At(14 + d)
        }
        Proto::Arp => {
            g.push(ether_type(ETHERTYPE_ARP));
            LoadBase::At(14 + d)
        }
        Proto::Rarp => {
            g.push(ether_type(ETHERTYPE_RARP));
            LoadBase::At(14 + d)
        }
        Proto::Ip6 => {
            g.push(ether_type(ETHERTYPE_IPV6));
            LoadBase::At(14 + d)
        }
        Proto::Icmp6 => {
            g.push(ether_type(ETHERTYPE_IPV6));
            g.push(eq(link(20, Size::B), 58));
            LoadBase::At(54 + d)
        }
        Proto::Vrrp | Proto::Carp => {
            g.push(ip_proto(112));
            g.push(not_fragment());
            LoadBase::Transport(d)
        }
        Proto::Tcp | Proto::Udp | Proto::Sctp | Proto::Icmp => {
            g.insert(0, ether_type(ETHERTYPE_IP));
            g.push(proto_abbrev(layer));
            g.push(not_fragment());
            LoadBase::Transport(d)
        }
    };
    (base, g)
}

/// An expression's steps as the IR computes them, and its loads' guards
/// appended to `guards` in libpcap's order (an index's before its
/// load's; of a binary operator, the left operand's alone).
fn value_ops(a: &[Arith], guards: &mut Vec<Cond>, d: u32) -> Vec<Op> {
    let mut ops = Vec::with_capacity(a.len());
    // The guards of each operand on the evaluation stack.
    let mut pending: Vec<Vec<Cond>> = Vec::new();
    for &x in a {
        match x {
            Arith::Num(n) => {
                ops.push(Op::Const(n));
                pending.push(Vec::new());
            }
            Arith::Len => {
                ops.push(Op::Len);
                pending.push(Vec::new());
            }
            Arith::Load(layer, size) => {
                let inner = pending.pop().unwrap_or_default();
                let (base, g) = load_guards(layer, inner, d);
                ops.push(Op::Load(base, size));
                pending.push(g);
            }
            Arith::Neg => ops.push(Op::Neg),
            Arith::Bin(b) => {
                // libpcap 1.10's `gen_arth` returns its left operand with
                // the left operand's guards only: the right operand's
                // protocol tests are dropped (`arp[0] + tcp[0]` reads the
                // TCP field of an ARP packet), and so they are here.
                pending.pop();
                ops.push(match b {
                    ArithOp::Add => Op::Add,
                    ArithOp::Sub => Op::Sub,
                    ArithOp::Mul => Op::Mul,
                    ArithOp::Div => Op::Div,
                    ArithOp::Mod => Op::Mod,
                    ArithOp::And => Op::And,
                    ArithOp::Or => Op::Or,
                    ArithOp::Xor => Op::Xor,
                    ArithOp::Shl => Op::Shl,
                    ArithOp::Shr => Op::Shr,
                });
            }
        }
    }
    guards.extend(pending.into_iter().flatten());
    ops
}

/// How an operand reaches its consumer, for the refusals inside it. A
/// refused statement dies (libpcap's `opt_deadstores`) once every
/// statement between it and a consumer that stopped reading it has died,
/// one a round, and a statement dead before the refusal's round is never
/// refused (`0 / (e % (f & 0))`: the division is the constant 0 in the
/// second pass's first round, the modulus dies in its second, and would
/// have been refused in its third).
#[derive(Clone, Copy, Debug)]
struct Link {
    /// Rounds from the consumer's death to the operand's top statement's,
    /// by how libpcap's first pass left the operand reaching it: the right
    /// operand through X (`tax`, then the top: [`LINK_X`]), the left one
    /// through a scratch slot (`ld M`, `st M`, then the top:
    /// [`LINK_SCRATCH`]) or straight in A when the right operand is a
    /// number the consumer takes as an immediate (`op #k`, the `ld M` the
    /// value A holds already and dropped: [`LINK_A`]); a negation's operand
    /// in A; a load's index through X.
    cost: u32,
    /// The round from which the consumer, folded to a constant, no longer
    /// reads its operands: as if it had died the round before.
    fold: Option<u32>,
    /// The round in which the consumer becomes a no-op (`add #0`, `or #0`,
    /// `xor #0`, `lsh #0`, `rsh #0`), its left operand then read by what
    /// read it.
    nop: Option<u32>,
}

const LINK_X: u32 = 2;
const LINK_SCRATCH: u32 = 3;
const LINK_A: u32 = 1;

impl Link {
    /// A link with neither fold nor no-op.
    fn new(cost: u32) -> Self {
        Link {
            cost,
            fold: None,
            nop: None,
        }
    }

    /// A link to a consumer that folds in round `fold`, if it does.
    fn folding(cost: u32, fold: Option<u32>) -> Self {
        Link {
            fold,
            ..Link::new(cost)
        }
    }

    /// The round the operand's top statement dies in, given its
    /// consumer's (`i64::MAX / 4`: never).
    fn death(self, above: i64) -> i64 {
        let stops = self.fold.map_or(above, |f| above.min(i64::from(f) - 1));
        let cost = i64::from(self.cost);
        match self.nop {
            // Until round `n` the operand feeds the consumer; from then
            // on, whatever read the consumer.
            Some(n) => (stops + cost).min(stops.max(i64::from(n)) + cost - 1),
            None => stops + cost,
        }
    }
}

/// The operands of one side of a comparison, each with its consumer and
/// how it reaches it, and the refusals made at them: whether a refusal is
/// made is known only at the top, from every fold above it. Linear in the
/// number of operands, however many refusals there are.
#[derive(Default)]
struct Chains {
    /// Each operand's consumer and link (`None`: the top).
    up: Vec<Option<(usize, Link)>>,
    /// Each refusal and the operand whose statement it is, in the order
    /// of the block's statements.
    refusals: Vec<(Refusal, usize)>,
}

impl Chains {
    fn node(&mut self) -> usize {
        self.up.push(None);
        self.up.len() - 1
    }

    /// `operand` read by `consumer` through `link`.
    fn link(&mut self, operand: &Operand, consumer: usize, link: Link) {
        // Read through X, a `txa` is where the `tax` after it, dropped as
        // storing what X holds, was.
        let link = match (operand.in_x, link.cost) {
            (true, LINK_X) => Link { cost: 1, ..link },
            _ => link,
        };
        self.up[operand.node] = Some((consumer, link));
    }

    /// The refusals made, the earliest round's first and of one round's
    /// the first in the block, into `refused`. A consumer is created after
    /// its operands, so one walk from the last down has each consumer's
    /// death before its operands'.
    fn settle(self, refused: &mut Option<Refusal>) {
        const NEVER: i64 = i64::MAX / 4;
        let mut death = vec![NEVER; self.up.len()];
        for i in (0..self.up.len()).rev() {
            if let Some((consumer, link)) = self.up[i] {
                death[i] = link.death(death[consumer]);
            }
        }
        for (r, node) in self.refusals {
            if death[node] >= i64::from(r.round) {
                *refused = Some(match *refused {
                    Some(first) if first.round <= r.round => first,
                    _ => r,
                });
            }
        }
    }
}

/// An operand on [`fold_values`]'s stack.
struct Operand {
    /// Its first op in the output.
    start: usize,
    /// Its value, if constant.
    k: Option<u32>,
    /// The pass in which libpcap first knows a constant `k`: folding two
    /// constants is known at once; `e * 0` and `e & 0` (with `e` not yet
    /// constant) only a pass after their zero (the X operand becomes an
    /// immediate first), which decides whether `0 % (e * 0)` folds the
    /// accumulator's 0 first or sees the zero divisor.
    pass: u32,
    /// A number as the user wrote it (an immediate to its consumer).
    literal: bool,
    /// Its value is X's, copied to A (`txa`, of `0 + e`) after `e`'s
    /// `tax`.
    in_x: bool,
    /// Its top statement in [`Chains`].
    node: usize,
}

impl Operand {
    fn new(start: usize, k: Option<u32>, pass: u32, node: usize) -> Self {
        Operand {
            start,
            k,
            pass,
            literal: false,
            in_x: false,
            node,
        }
    }
}

/// Constant folding as libpcap's second pass does it, after the guards
/// are taken: an operator on two constants is a constant (but a zero
/// divisor stays, and is reported in `refused`, for [`Leaf::poison`],
/// unless a fold leaves it dead before its round: [`Link`]); a
/// constant zero right operand
/// makes `*` and `&` the constant 0, and a constant zero left operand
/// makes `*`, `/`, `%`, `&`, `<<` and `>>` the constant 0 and `+`, `|`,
/// `^` the right operand. The loads of an operand folded away die (their
/// guards stay). Of two refusals, `refused` keeps the earlier round's,
/// and of one round's the one first in the block.
fn fold_values(ops: Vec<Op>, refused: &mut Option<Refusal>) -> (Vec<Op>, u32) {
    let mut out: Vec<Op> = Vec::with_capacity(ops.len());
    let mut chains = Chains::default();
    let mut stack: Vec<Operand> = Vec::new();
    // An operand missing from the stack (never, for the parser's postfix)
    // is one of its own with no value.
    let pop = |stack: &mut Vec<Operand>, out: &Vec<Op>, chains: &mut Chains| {
        stack
            .pop()
            .unwrap_or_else(|| Operand::new(out.len(), None, 0, chains.node()))
    };
    for op in ops {
        let node = chains.node();
        let operand = match op {
            Op::Const(k) => Operand {
                literal: true,
                ..Operand::new(out.len(), Some(k), 0, node)
            },
            Op::Len => Operand::new(out.len(), None, 0, node),
            Op::Load(LoadBase::At(at), size) => {
                let index = pop(&mut stack, &out, &mut chains);
                let start = index.start;
                if let Some(i) = index.k {
                    // A constant index makes the indexed load an absolute
                    // one, its offset summed modulo 2^32 (`ip[-13]` is
                    // frame byte 1).
                    chains.link(&index, node, Link::folding(LINK_X, Some(index.pass)));
                    out.truncate(start);
                    out.extend([
                        Op::Const(0),
                        Op::Load(LoadBase::At(i.wrapping_add(at)), size),
                    ]);
                    stack.push(Operand::new(start, None, 0, node));
                    continue;
                }
                chains.link(&index, node, Link::new(LINK_X));
                // `ld #c; add x; tax; ld [x + k]` becomes `tax; ld [x + (k +
                // c)]` (libpcap's `opt_peep`): the constant moves into the
                // offset, summed modulo 2^32, and the load's bounds check
                // then takes it without wrapping (`ip[-37 + ip[15]]` reads
                // nothing).
                // Only `c + e`: `e + c` keeps its `add #c`.
                let addend = match &out[start..] {
                    [Op::Const(c), rest @ .., Op::Add] if single_operand(rest) => {
                        Some((*c, start + 1..start + 1 + rest.len()))
                    }
                    _ => None,
                };
                if let Some((c, keep)) = addend {
                    let kept: Vec<Op> = out[keep].to_vec();
                    out.truncate(start);
                    out.extend(kept);
                    out.push(Op::Load(LoadBase::At(at.wrapping_add(c)), size));
                    stack.push(Operand::new(start, None, 0, node));
                    continue;
                }
                Operand::new(start, None, 0, node)
            }
            Op::Load(..) => {
                let index = pop(&mut stack, &out, &mut chains);
                chains.link(&index, node, Link::new(LINK_X));
                Operand::new(index.start, None, 0, node)
            }
            Op::Neg => {
                let a = pop(&mut stack, &out, &mut chains);
                let k = a.k.map(u32::wrapping_neg);
                chains.link(&a, node, Link::folding(LINK_A, k.map(|_| a.pass)));
                Operand::new(a.start, k, a.pass, node)
            }
            bin => {
                let b = pop(&mut stack, &out, &mut chains);
                let a = pop(&mut stack, &out, &mut chains);
                let (start, b_start) = (a.start, b.start);
                let (a_pass, b_pass) = (a.pass, b.pass);
                // An accumulator known to be 0 before the right operand
                // is: `opt_stmt` makes `*`, `/`, `%`, `&`, `<<` and `>>`
                // the constant 0 without looking at the right operand.
                let zero_first = a.k == Some(0) && b.k.is_some() && a_pass < b_pass;
                // What `opt_stmt` refuses once the right operand is known.
                // A zero divisor beside a dividend not yet known is first
                // made an immediate (`div #0`), refused when the block is
                // next visited, a round later; with both known `fold_op`
                // refuses at once. An oversized shift is refused as it is
                // made an immediate; `fold_op` shifts all bits out.
                let divisor_first = a.k.is_none() || a_pass > b_pass;
                let why = match (bin, b.k) {
                    _ if zero_first => None,
                    (Op::Div, Some(0)) => Some(("division by zero", divisor_first)),
                    (Op::Mod, Some(0)) => Some(("modulus by zero", divisor_first)),
                    (Op::Shl | Op::Shr, Some(n)) if n > 31 && divisor_first => {
                        Some(("shift by more than 31 bits", false))
                    }
                    _ => None,
                };
                if let Some((reason, later)) = why {
                    let round = b_pass + u32::from(later);
                    chains.refusals.push((Refusal { reason, round }, node));
                }
                let absorbing = matches!(
                    bin,
                    Op::Mul | Op::Div | Op::Mod | Op::And | Op::Shl | Op::Shr
                );
                // The constant, the pass it is known in, and the round in
                // which the consumer stops reading its operands.
                let (k, pass, fold) = match (a.k, b.k) {
                    (Some(0), Some(_)) if zero_first && absorbing => {
                        (Some(0), a_pass, Some(a_pass))
                    }
                    // Known before the left operand (which may become a
                    // constant later), the zero makes `mul x` `mul #0`, and
                    // that `ld #0` the round after.
                    (_, Some(0)) if matches!(bin, Op::Mul | Op::And) && divisor_first => {
                        (Some(0), b_pass + 1, Some(b_pass + 1))
                    }
                    (Some(x), Some(y)) => {
                        let pass = a_pass.max(b_pass);
                        let k = crate::ir::eval_value(&[Op::Const(x), Op::Const(y), bin], &[], 0);
                        (k, pass, k.map(|_| pass))
                    }
                    // An accumulator known to be 0: `opt_stmt` makes these
                    // the constant 0, and `0 + x`, `0 | x`, `0 ^ x` just x.
                    (Some(0), _) if absorbing => (Some(0), a_pass, Some(a_pass)),
                    (Some(0), None) if matches!(bin, Op::Add | Op::Or | Op::Xor) => {
                        // `txa`: the right operand's value, through X (its
                        // `tax`, then it); the left one unread from the
                        // round its 0 is known.
                        out.drain(start..b_start);
                        chains.link(&a, node, Link::folding(LINK_SCRATCH, Some(a_pass)));
                        chains.link(&b, node, Link::new(LINK_X));
                        stack.push(Operand {
                            in_x: true,
                            ..Operand::new(start, None, 0, node)
                        });
                        continue;
                    }
                    _ => (None, a_pass.max(b_pass), None),
                };
                // `e + 0`, `e | 0`, `e ^ 0`, `e << 0`, `e >> 0`: made an
                // immediate once the 0 is known, and a no-op the round
                // after.
                let nop = (a.k.is_none()
                    && b.k == Some(0)
                    && matches!(bin, Op::Add | Op::Or | Op::Xor | Op::Shl | Op::Shr))
                .then_some(b_pass + 1);
                let a_link = Link {
                    cost: if b.literal { LINK_A } else { LINK_SCRATCH },
                    fold,
                    nop,
                };
                chains.link(&a, node, a_link);
                chains.link(&b, node, Link::folding(LINK_X, fold.or(nop)));
                Operand::new(start, k, pass, node)
            }
        };
        match operand.k {
            Some(k) => {
                out.truncate(operand.start);
                out.push(Op::Const(k));
            }
            None => out.push(op),
        }
        stack.push(operand);
    }
    chains.settle(refused);
    let pass = stack.last().map_or(0, |top| top.pass);
    (out, pass)
}

/// Whether gencode moves a constant of `ops` into X (`ld #k; st M; ldx
/// M`): a load's index or a binary operator's right operand. libpcap's
/// peephole rewrites that in the first two rounds of its first pass; a
/// constant left operand goes to A and only in the first.
fn constant_to_x(ops: &[Op]) -> bool {
    // Whether each operand on the stack is a constant written out.
    let mut stack: Vec<bool> = Vec::new();
    for op in ops {
        match op {
            Op::Const(_) => stack.push(true),
            Op::Len => stack.push(false),
            Op::Load(..) | Op::Neg => {
                let index = stack.pop().unwrap_or(false);
                if matches!(op, Op::Load(..)) && index {
                    return true;
                }
                stack.push(false);
            }
            _ => {
                if stack.pop().unwrap_or(false) {
                    return true;
                }
                stack.pop();
                stack.push(false);
            }
        }
    }
    false
}

/// Whether `ops` computes exactly one value (a whole operand).
fn single_operand(ops: &[Op]) -> bool {
    let mut depth = 0usize;
    for op in ops {
        match op {
            Op::Const(_) | Op::Len => depth += 1,
            Op::Load(..) | Op::Neg if depth > 0 => {}
            _ if depth > 1 => depth -= 1,
            _ => return false,
        }
    }
    depth == 1
}

/// `lhs op rhs` as libpcap's `gen_relation` emits it and its optimizer
/// leaves it: the loads' protocol guards, then one jump on the left
/// side's value against the right side (a constant, or `X`). A jump
/// against `X` becomes a test of one computed value: `lhs - rhs = 0` for
/// equality, `lhs > rhs` (or `>=`) as 0 or 1 otherwise.
fn relation_cond(r: &Relation, values: &mut Values, d: u32) -> Cond {
    let (cmp, negate) = match r.op {
        RelOp::Eq => (Cmp::Eq, false),
        RelOp::Ne => (Cmp::Eq, true),
        RelOp::Gt => (Cmp::Gt, false),
        RelOp::Le => (Cmp::Gt, true),
        RelOp::Ge => (Cmp::Ge, false),
        RelOp::Lt => (Cmp::Ge, true),
    };
    let mut guards = Vec::new();
    let mut refused = None;
    let lhs_ops = value_ops(&r.lhs, &mut guards, d);
    let rhs_ops = value_ops(&r.rhs, &mut guards, d);
    if values.raw {
        // Unoptimized: both sides computed as written, every load made,
        // a zero divisor or a large shift met at run time.
        let (ops, cmp, k) = match rhs_ops[..] {
            [Op::Const(k)] => (lhs_ops, cmp, k),
            _ => {
                let mut ops = lhs_ops;
                ops.extend(rhs_ops);
                ops.push(match cmp {
                    Cmp::Eq => Op::Sub,
                    Cmp::Gt => Op::Gt,
                    _ => Op::Ge,
                });
                (ops, Cmp::Eq, u32::from(cmp != Cmp::Eq))
            }
        };
        let leaf = value_leaf(values.intern(ops), !0, cmp, k);
        guards.push(if negate { not(leaf) } else { leaf });
        return Cond::And(guards);
    }
    let (lhs, lhs_known) = fold_values(lhs_ops.clone(), &mut refused);
    let (rhs, rhs_known) = fold_values(rhs_ops.clone(), &mut refused);
    // The round of the second pass in which both sides are known.
    let mut decided_in = lhs_known.max(rhs_known);
    // Two constants. Written as two numbers, libpcap's first pass decides
    // the jump (`opt_peep` on a constant accumulator and index register)
    // and threads edges past it: in its first round for `>` and `>=`
    // (`jgt x`: X becomes the jump's constant, and A is one), in its
    // second for `=` (`sub x; jeq #0`: the first round only merges X into
    // the jump, and A, the difference, is constant from the next). Edges
    // the first round moved stay where it moved them: `not ip proto 6 and
    // 16 = 10`, reached by two edges that each know IPv4, keeps its
    // protocol test, whose load rejects a short packet. Computed (`26 -
    // 6`), they are constant only once its second pass folds the
    // arithmetic: the block, loading nothing, stays where the first pass
    // left it, after the tests before it, whose loads still reject a short
    // packet.
    let literal = matches!((&r.lhs[..], &r.rhs[..]), ([Arith::Num(_)], [Arith::Num(_)]));
    let decided = match (&lhs[..], &rhs[..]) {
        (&[Op::Const(a)], &[Op::Const(b)]) => {
            let holds = match cmp {
                Cmp::Eq => a == b,
                Cmp::Gt => a > b,
                _ => a >= b,
            };
            Some(if literal {
                Late::Early {
                    holds,
                    round: u64::from(cmp == Cmp::Eq),
                }
            } else {
                Late::Constant(holds)
            })
        }
        // `e & 0xffffffff = 0` (or `!=`) with a computed `e`: the second
        // pass, once the right side is known to be 0, drops `sub x`, and
        // `and #0xffffffff; jeq #0` becomes `jset #0xffffffff`, which
        // always holds (as a field's, [`relation`]): the comparison never
        // holds, its loads stay. Another mask's `jset` decides as the
        // comparison does.
        ([.., Op::Const(u32::MAX), Op::And], &[Op::Const(0)])
            if cmp == Cmp::Eq && lhs.len() > 2 =>
        {
            // `sub #0` is merged into the jump first, `and #m` a round on.
            decided_in += 1;
            Some(Late::Decided(false))
        }
        _ => None,
    };
    // The accumulator's identity in libpcap's first pass, which folds
    // nothing: a left side that only the second pass makes a constant
    // (`9 >> 24`) is not the same value as that constant written out, so
    // a pull-up does not move a later `0 = arp[6:4]` above its guard.
    // A plain field (`ether[14:2]`, masked or not) is the value a
    // comparison of that field with a number leaves ([`Acc::Field`]).
    let field = match (&r.lhs[..], &lhs_ops[..]) {
        ([Arith::Num(offset), Arith::Load(..)], &[_, Op::Load(base, size)]) => Some(Acc::Field {
            base,
            offset: *offset,
            size,
            mask: None,
        }),
        (
            [
                Arith::Num(offset),
                Arith::Load(..),
                Arith::Num(m),
                Arith::Bin(ArithOp::And),
            ],
            &[_, Op::Load(base, size), ..],
        ) => Some(Acc::Field {
            base,
            offset: *offset,
            size,
            mask: Some(*m),
        }),
        _ => None,
    };
    let a = match (field, &lhs[..]) {
        (Some(field), _) => field,
        (None, [Op::Const(_)]) => Acc::Value(values.side(&lhs_ops)),
        (None, _) => Acc::Value(values.side(&lhs)),
    };
    let x = match rhs[..] {
        [Op::Const(_)] => None,
        _ => Some(values.side(&rhs)),
    };
    let (r_cmp, r_k) = match rhs[..] {
        [Op::Const(k)] => (cmp, k),
        _ => (cmp, 0),
    };
    let (ops, cmp, k) = match (&lhs[..], &rhs[..]) {
        (_, &[Op::Const(k)]) => (lhs, cmp, k),
        _ => {
            let mut ops = lhs;
            ops.extend(rhs);
            ops.push(match cmp {
                Cmp::Eq => Op::Sub,
                Cmp::Gt => Op::Gt,
                _ => Op::Ge,
            });
            let k = u32::from(cmp != Cmp::Eq);
            (ops, Cmp::Eq, k)
        }
    };
    let value = values.intern(ops);
    let field = Field {
        base: Base::Value(value),
        offset: 0,
        size: Size::W,
    };
    let leaf = Cond::Test(Leaf {
        test: Test {
            field,
            mask: !0,
            cmp,
            value: k,
        },
        key: Key::Arith {
            a,
            cmp: r_cmp,
            k: r_k,
            x,
        },
        invert: false,
        late: decided.unwrap_or(Late::Keep),
        decided_in,
        peephole_rounds: 1 + u8::from(
            constant_to_x(&lhs_ops)
                || constant_to_x(&rhs_ops)
                || matches!(rhs_ops[..], [Op::Const(_)]),
        ),
        poison: refused.map(|why| (r.column, why)),
    });
    guards.push(if negate { not(leaf) } else { leaf });
    Cond::And(guards)
}

/// Whether a test is a link-layer type's (gencode's `gen_linktype`): an
/// EtherType, or the 802.3 length test, at byte 12.
fn link_type_test(leaf: &Leaf) -> bool {
    matches!(leaf.key, Key::Prim { field, .. } if field == link(12, Size::H))
}

/// Whether `p` can follow an `mpls` (libpcap's `gen_mpls_linktype`):
/// every link-layer type it tests is IPv4's or IPv6's, which the IP
/// version below the bottom label tells; any other is "unsupported
/// protocol over mpls" to libpcap.
pub(crate) fn supported_over_mpls(p: &Primitive) -> bool {
    match p {
        Primitive::Llc(_) => return true,
        // gen_load's type test for an ARP or RARP load, which gencode
        // makes before it knows whether the test stays (a load in
        // parentheses keeps none, [`relation_cond`]).
        Primitive::Relation(r) if r.loads_from(|l| matches!(l, Proto::Arp | Proto::Rarp)) => {
            return false;
        }
        _ => {}
    }
    fn ok(c: &Cond) -> bool {
        match c {
            Cond::Test(leaf) => {
                !link_type_test(leaf)
                    || matches!(
                        leaf.key,
                        Key::Prim { mask: u32::MAX, cmp: Cmp::Eq, value, .. }
                            if value == ETHERTYPE_IP || value == ETHERTYPE_IPV6
                    )
            }
            Cond::Const(_) => true,
            Cond::Not(c) => ok(c),
            Cond::And(cs) | Cond::Or(cs) => cs.iter().all(ok),
        }
    }
    let mut values = Values::default();
    let c = match below_mpls(p) {
        Primitive::Relation(ref r) => relation_cond(r, &mut values, 0),
        ref p => primitive(p, &mut values),
    };
    ok(&c)
}

/// `p` as gencode builds it below a label stack: `host` and `net`
/// without a protocol test IPv4 alone there (gen_host skips ARP and RARP
/// when `label_stack_depth` is not 0).
fn below_mpls(p: &Primitive) -> Primitive {
    match *p {
        Primitive::Host {
            proto: None,
            dir,
            addr,
        } => Primitive::Host {
            proto: Some(Proto::Ip),
            dir,
            addr,
        },
        Primitive::Net {
            proto: None,
            dir,
            addr,
            mask,
        } => Primitive::Net {
            proto: Some(Proto::Ip),
            dir,
            addr,
            mask,
        },
        ref p => p.clone(),
    }
}

/// `c` with each link-layer type test (a leaf at 12, not yet moved)
/// replaced by `with` of its type.
fn map_link_types(c: Cond, with: impl Fn(u32) -> Cond) -> Cond {
    let mut c = c;
    each_test(&mut c, |c| {
        if let Cond::Test(leaf) = c
            && link_type_test(leaf)
        {
            debug_assert!(matches!(
                leaf.key,
                Key::Prim {
                    mask: u32::MAX,
                    cmp: Cmp::Eq,
                    ..
                }
            ));
            *c = with(leaf.key.value());
        }
    });
    c
}

/// Calls `f` on every test of `c` (each a [`Cond::Test`], which `f` may
/// change or replace), walking the tree with a stack rather than by
/// recursion, since a filter's tree may be thousands deep.
fn each_test(c: &mut Cond, mut f: impl FnMut(&mut Cond)) {
    let mut stack: Vec<&mut Cond> = vec![c];
    while let Some(c) = stack.pop() {
        match c {
            Cond::Test(_) => f(c),
            Cond::Not(x) => stack.push(x),
            Cond::And(cs) | Cond::Or(cs) => stack.extend(cs.iter_mut()),
            Cond::Const(_) => {}
        }
    }
}

/// `c` below a label stack: each IPv4 or IPv6 EtherType test becomes
/// gen_mpls_linktype's bottom-of-stack bit (the byte two before the
/// payload, `& 1 = 1`) and IP version (the payload's first byte, `& 0xf0`
/// = 0x40 or 0x60), at the unmoved offsets 12 and 14 for [`shift_cond`]
/// to move. The parser has refused any other type
/// ([`supported_over_mpls`]).
fn over_mpls(c: Cond) -> Cond {
    map_link_types(c, |t| {
        let version = if t == ETHERTYPE_IPV6 { 0x60 } else { 0x40 };
        Cond::And(vec![
            masked_eq(link(12, Size::B), 1, 1),
            masked_eq(link(14, Size::B), 0xf0, version),
        ])
    })
}

/// PPP's protocol for MPLS unicast (gen_mpls on PPP).
const PPP_MPLS_UCAST: u32 = 0x0281;

/// The PPP protocol libpcap tests for an EtherType (or an 802.3 SAP) on a
/// PPP link layer (gencode's `ethertype_to_ppptype`); any other type is
/// compared as it is.
fn ppp_type(t: u32) -> u32 {
    match t {
        ETHERTYPE_IP => 0x0021,
        ETHERTYPE_IPV6 => 0x0057,
        ETHERTYPE_DN => 0x0027,
        ETHERTYPE_ATALK => 0x0029,
        // ETHERTYPE_NS, Xerox NS IDP.
        0x0600 => 0x0025,
        // LLCSAP_ISONS: OSI.
        0xfe => 0x0023,
        // LLCSAP_8021D: spanning tree's bridging PDUs.
        0x42 => 0x0031,
        LLCSAP_IPX => 0x002b,
        t => t,
    }
}

/// `c` on the PPP link layer `pppoes` leaves: each link-layer type test
/// (an EtherType at 12, not yet moved) compares the PPP protocol libpcap
/// maps the type to ([`ppp_type`]); [`shift_cond`] then moves it to the
/// PPP protocol field.
fn ppp_types(c: Cond) -> Cond {
    map_link_types(c, |t| eq(link(12, Size::H), ppp_type(t)))
}

/// `c` as libpcap 1.10 generates it after `shift` `vlan` primitives
/// (`gen_vlan_no_bpf_extensions` moves the link-layer type's and
/// payload's offsets four bytes on per tag): every frame field from byte
/// 12 on moves `4 * shift` bytes on, except those of `ether[...]`
/// comparisons (the link header stays where it is, as do the MAC
/// addresses before byte 12); a field behind the IPv4 header becomes a
/// computed value read past the moved IHL byte (the trie's transport base
/// is the unmoved one). Computed values were built moved.
fn shift_cond(c: Cond, shift: u32, values: &mut Values) -> Cond {
    let d = 4 * shift;
    let mut c = c;
    each_test(&mut c, |c| {
        let Cond::Test(leaf) = c else { return };
        let f = leaf.test.field;
        let new = match f.base {
            Base::Link if f.offset >= 12 => Field {
                offset: f.offset + d,
                ..f
            },
            Base::Transport => Field {
                base: Base::Value(values.intern(vec![
                    Op::Const(f.offset),
                    Op::Load(LoadBase::Transport(d), f.size),
                ])),
                offset: 0,
                size: Size::W,
            },
            _ => return,
        };
        match &mut leaf.key {
            Key::Raw { class: 0, .. } => return,
            Key::Raw { class, .. } => *class += 4 * shift,
            Key::Prim { field, .. } => *field = new,
            Key::Arith { .. } | Key::Diff { .. } => return,
        }
        leaf.test.field = new;
    });
    c
}

/// A test of the computed value `value` (`& mask cmp k`), for a filter
/// compiled without the optimizer (whose keys it never reads).
fn value_leaf(value: u32, mask: u32, cmp: Cmp, k: u32) -> Cond {
    let field = Field {
        base: Base::Value(value),
        offset: 0,
        size: Size::W,
    };
    prim(field, mask, cmp, k)
}

/// libpcap's Geneve UDP port.
const GENEVE_PORT: u32 = 6081;
/// The Geneve protocol type of an Ethernet frame (Transparent Ethernet
/// Bridging).
const ETHERTYPE_TEB: u32 = 0x6558;

/// Where the parts of a Geneve frame whose outer header is at `outer` are
/// ([`Geneve`]), for `layer` with `add` added.
fn geneve_base(outer: Outer, layer: GeneveLayer, add: u32) -> LoadBase {
    let net = 14 + 4 * outer.shift;
    // The outer IPv4 test's field: the EtherType, or PPP's protocol.
    let v4_value = if outer.ppp {
        ppp_type(ETHERTYPE_IP)
    } else {
        ETHERTYPE_IP
    };
    let (v4_at, v4_size, v4_mask) = (12 + 4 * outer.shift, Size::H, 0xffff);
    LoadBase::Geneve(Geneve {
        net,
        v4_at,
        v4_size,
        v4_mask,
        v4_value,
        layer,
        add,
    })
}

/// libpcap 1.10's `gen_geneve` (with the optimizer off, as it leaves
/// it): gen_geneve4 (IPv4, UDP, not a fragment, destination port 6081,
/// the version bits of the Geneve header's first byte clear, the VNI in
/// the top 24 bits of its second word), or gen_geneve6 (the same at
/// IPv6's fixed offsets); then gen_geneve_offsets, whose loads of the
/// option length and the protocol type (`frame[g .. g + 4]`) reject a
/// frame too short for them. That last test is the gate that every later
/// primitive's offsets need ([`check_geneve_gate`]).
fn geneve(vni: Option<u32>, outer: Outer, values: &mut Values) -> Cond {
    let tp = |offset, size| Field {
        base: Base::Transport,
        offset,
        size,
    };
    let mut v4 = vec![
        ether_type(ETHERTYPE_IP),
        eq(link(23, Size::B), 17),
        not_fragment(),
        eq(tp(2, Size::H), GENEVE_PORT),
        masked_eq(tp(8, Size::B), 0xc0, 0),
    ];
    let mut v6 = vec![
        ether_type(ETHERTYPE_IPV6),
        eq(link(20, Size::B), 17),
        eq(link(56, Size::H), GENEVE_PORT),
        masked_eq(link(62, Size::B), 0xc0, 0),
    ];
    if let Some(v) = vni {
        v4.push(masked_eq(tp(12, Size::W), 0xffff_ff00, v << 8));
        v6.push(masked_eq(link(66, Size::W), 0xffff_ff00, v << 8));
    }
    let c = Cond::Or(vec![Cond::And(v4), Cond::And(v6)]);
    let c = if outer.ppp { ppp_types(c) } else { c };
    // (A field behind the IPv4 header stays one the trie can merge on
    // when nothing moves it.)
    let c = match outer.shift {
        0 => c,
        n => shift_cond(c, n, values),
    };
    let gate = values.intern(vec![
        Op::Const(0),
        Op::Load(geneve_base(outer, GeneveLayer::Header, 0), Size::W),
    ]);
    // A load whose outcome decides nothing: both edges lead on.
    Cond::And(vec![
        c,
        Cond::Or(vec![value_leaf(gate, 0, Cmp::Eq, 0), Cond::Const(true)]),
    ])
}

/// Whether `ops` is the gate [`geneve`] ends with.
fn is_geneve_gate(ops: &[Op]) -> bool {
    matches!(
        ops,
        [
            Op::Const(0),
            Op::Load(
                LoadBase::Geneve(Geneve {
                    layer: GeneveLayer::Header,
                    ..
                }),
                Size::W
            )
        ]
    )
}

/// `inner`, a primitive after a `geneve` whose outer header is at
/// `outer`, read in the encapsulated packet: built as on the outer frame
/// (with the `vlan`s after the `geneve` moving it as they do), then each
/// field moved to the Geneve frame's offsets (libpcap's variable
/// `off_linkhdr`, `off_linktype` and `off_linkpl`): a MAC address or an
/// `ether[...]` load to the inner link header, the type to the inner
/// link-layer type, the rest to the inner payload or behind its IPv4
/// header. A MAC address test (`ether host`, `broadcast`, `multicast`)
/// first asks for an inner Ethernet header (gen_prevlinkhdr_check's
/// gen_geneve_ll_check).
fn in_geneve(inner: &Primitive, outer: Outer, values: &mut Values) -> Cond {
    let (tags, bare) = match inner {
        Primitive::Shifted {
            shift, inner: p, ..
        } => (*shift, &**p),
        Primitive::Vlan { shift, .. } => (*shift, inner),
        p => (0, p),
    };
    let s = 4 * tags;
    // gen_ether_linktype reads an LLC SAP's DSAP two bytes past the
    // link-layer type (OR_LINKTYPE), not in the payload (OR_LLC) as its
    // other 802.2 tests do: in a Geneve frame without Ethernet, those
    // differ.
    let dsap_after_type = matches!(
        bare,
        Primitive::EtherProto(n) if *n <= ETHERMTU && !matches!(*n, 0x06 | 0xf0 | 0xfe | LLCSAP_IPX)
    );
    let c = primitive(inner, values);
    let base = |layer, add| geneve_base(outer, layer, add);
    let map_ops = |ops: &[Op]| -> Vec<Op> {
        ops.iter()
            .map(|&op| match op {
                Op::Load(LoadBase::At(0), size) => Op::Load(base(GeneveLayer::Link, 0), size),
                Op::Load(LoadBase::At(k), size) => {
                    Op::Load(base(GeneveLayer::Payload, k.saturating_sub(14)), size)
                }
                Op::Load(LoadBase::Transport(d), size) => {
                    Op::Load(base(GeneveLayer::Transport, d), size)
                }
                op => op,
            })
            .collect()
    };
    let mut c = c;
    each_test(&mut c, |c| {
        let Cond::Test(leaf) = c else { return };
        let f = leaf.test.field;
        let ops = match f.base {
            Base::Link => {
                let (layer, index, add) =
                    // (Nothing but the link header lies before the
                    // type, which the tags after the `geneve` move.)
                    if f.offset < 12 + s || matches!(leaf.key, Key::Raw { class: 0, .. })
                    {
                        (GeneveLayer::Link, f.offset, 0)
                    } else if f.offset < 14 + s || (dsap_after_type && f.offset == 14 + s) {
                        (GeneveLayer::Type, f.offset - 12 - s, s)
                    } else {
                        (GeneveLayer::Payload, f.offset - 14 - s, s)
                    };
                vec![Op::Const(index), Op::Load(base(layer, add), f.size)]
            }
            Base::Transport => vec![
                Op::Const(f.offset),
                Op::Load(base(GeneveLayer::Transport, s), f.size),
            ],
            Base::Value(i) => map_ops(&values.list[i as usize]),
        };
        let i = values.intern(ops);
        leaf.test.field = Field {
            base: Base::Value(i),
            offset: 0,
            size: Size::W,
        };
    });
    if matches!(
        bare,
        Primitive::EtherHost { .. } | Primitive::Broadcast | Primitive::Multicast
    ) {
        let teb = values.intern(vec![
            Op::Const(2),
            Op::Load(base(GeneveLayer::Header, 0), Size::H),
        ]);
        c = Cond::And(vec![value_leaf(teb, !0, Cmp::Eq, ETHERTYPE_TEB), c]);
    }
    c
}

/// The condition `e` stands for. An `and`/`or` chain is a left-deep
/// tree: its spine is walked in a loop, and a run of one operator becomes
/// one `Cond::And`/`Cond::Or` (which lowers to the same blocks as the
/// nested pairs), so recursion is only into right operands and negations,
/// whose depth the parser's nesting limit bounds.
fn cond(e: &Expr, values: &mut Values) -> Cond {
    let mut spine: Vec<(bool, &Expr)> = Vec::new();
    let mut cur = e;
    let first = loop {
        match cur {
            Expr::And(a, b) => {
                spine.push((true, b));
                cur = a;
            }
            Expr::Or(a, b) => {
                spine.push((false, b));
                cur = a;
            }
            Expr::Not(a) => break not(cond(a, values)),
            Expr::Prim(p) => break primitive(p, values),
        }
    };
    let mut acc = first;
    let mut run: Option<bool> = None;
    for (and, right) in spine.into_iter().rev() {
        let right = cond(right, values);
        let same_run = match &mut acc {
            Cond::And(v) if run == Some(true) && and => Some(v),
            Cond::Or(v) if run == Some(false) && !and => Some(v),
            _ => None,
        };
        if let Some(v) = same_run {
            v.push(right);
        } else {
            let left = std::mem::replace(&mut acc, Cond::Const(false));
            acc = if and {
                Cond::And(vec![left, right])
            } else {
                Cond::Or(vec![left, right])
            };
        }
        run = Some(and);
    }
    acc
}

impl Drop for Cond {
    /// Dismantles nested conditions with a heap stack: an alternating
    /// `and`/`or` chain nests once per operator.
    fn drop(&mut self) {
        let mut stack: Vec<Cond> = Vec::new();
        let detach = |c: &mut Cond, stack: &mut Vec<Cond>| match c {
            Cond::And(v) | Cond::Or(v) => stack.append(v),
            Cond::Not(x) => stack.push(std::mem::replace(&mut **x, Cond::Const(false))),
            Cond::Test(_) | Cond::Const(_) => {}
        };
        detach(self, &mut stack);
        while let Some(mut c) = stack.pop() {
            detach(&mut c, &mut stack);
        }
    }
}

/// A test block of the graph as gencode emits it and libpcap's first
/// optimizer pass rewires it. Blocks are never shared at this stage (as in
/// libpcap, two identical blocks are still two blocks).
#[derive(Clone, Copy, Debug)]
struct Block {
    leaf: Leaf,
    then: NodeId,
    els: NodeId,
}

/// The first stage: blocks, children before parents (every edge points
/// to a lower index); ids 0 and 1 are Reject and Accept.
struct Blocks {
    blocks: Vec<Option<Block>>,
    /// Keep a test whose two edges agree (its load still rejects a short
    /// packet): for a filter compiled without the optimizer.
    keep: bool,
}

impl Blocks {
    /// The block deciding `c` that continues at `t` or `f`. The first
    /// operand of an `and`/`or` (where nested chains sit) and a negation
    /// are taken in a loop; only later operands recurse.
    fn lower(&mut self, c: &Cond, t: NodeId, f: NodeId) -> NodeId {
        let (mut c, mut t, mut f) = (c, t, f);
        loop {
            match c {
                Cond::Const(true) => return t,
                Cond::Const(false) => return f,
                Cond::Test(leaf) => {
                    if t == f && !self.keep {
                        return t;
                    }
                    self.blocks.push(Some(Block {
                        leaf: *leaf,
                        then: t,
                        els: f,
                    }));
                    return (self.blocks.len() - 1) as NodeId;
                }
                Cond::Not(x) => {
                    c = x;
                    std::mem::swap(&mut t, &mut f);
                }
                Cond::And(cs) => {
                    let Some((first, rest)) = cs.split_first() else {
                        return t;
                    };
                    t = rest.iter().rev().fold(t, |next, c| self.lower(c, next, f));
                    c = first;
                }
                Cond::Or(cs) => {
                    let Some((first, rest)) = cs.split_first() else {
                        return f;
                    };
                    f = rest.iter().rev().fold(f, |next, c| self.lower(c, t, next));
                    c = first;
                }
            }
        }
    }

    fn block(&self, id: NodeId) -> Option<&Block> {
        self.blocks[id as usize].as_ref()
    }

    fn edge(&self, id: NodeId, then: bool) -> NodeId {
        let b = self.block(id).expect("a block");
        if then { b.then } else { b.els }
    }

    fn set_edge(&mut self, id: NodeId, then: bool, to: NodeId) {
        let b = self.blocks[id as usize].as_mut().expect("a block");
        if then {
            b.then = to;
        } else {
            b.els = to;
        }
    }

    /// Each block's accumulator value as a number: two blocks leave the
    /// same value in the accumulator exactly when their numbers are equal
    /// (the pull-ups compare them at every step of their walks), in round
    /// `round` of the first pass.
    fn a_values(&self, round: u64) -> Vec<u32> {
        let mut numbers = HashMap::new();
        self.blocks
            .iter()
            .map(|b| match b {
                Some(b) => {
                    let next = numbers.len() as u32;
                    *numbers
                        .entry(b.leaf.key.in_round(round).a_value())
                        .or_insert(next)
                }
                None => u32::MAX,
            })
            .collect()
    }

    /// Which blocks are reachable from `root` in round `round` of the
    /// second pass: a constant comparison it decided in an earlier round
    /// jumps one way.
    fn decided_reach(&self, root: NodeId, round: u32) -> Vec<bool> {
        let mut seen = vec![false; self.blocks.len()];
        let mut stack = vec![root];
        while let Some(id) = stack.pop() {
            let Some(b) = self.block(id) else { continue };
            if std::mem::replace(&mut seen[id as usize], true) {
                continue;
            }
            match b.leaf.late {
                Late::Constant(holds) | Late::Decided(holds) if b.leaf.decided_in < round => {
                    stack.push(if holds { b.then } else { b.els });
                }
                _ => stack.extend([b.then, b.els]),
            }
        }
        seen
    }

    /// The blocks reachable from `root` grouped by level (the longest
    /// path to a verdict, from 1), each level in the order libpcap's
    /// `find_levels` lists it.
    fn levels(&self, root: NodeId) -> Vec<Vec<NodeId>> {
        let n = self.blocks.len();
        let mut level = vec![0usize; n];
        let mut seen = vec![false; n];
        let mut lists: Vec<Vec<NodeId>> = Vec::new();
        // Iterative DFS: JT first, then JF; a block is listed when both
        // of its children are done, at the front of its level's list.
        let mut stack = vec![(root, false)];
        while let Some((id, expanded)) = stack.pop() {
            let Some(b) = self.block(id) else { continue };
            if expanded {
                let l = 1 + level[b.then as usize].max(level[b.els as usize]);
                level[id as usize] = l;
                if lists.len() <= l {
                    lists.resize(l + 1, Vec::new());
                }
                lists[l].push(id);
                continue;
            }
            if seen[id as usize] {
                continue;
            }
            seen[id as usize] = true;
            stack.push((id, true));
            stack.push((b.els, false));
            stack.push((b.then, false));
        }
        // Listed last-first: each block goes to the front of its level.
        for l in &mut lists {
            l.reverse();
        }
        lists
    }

    /// Whether the edges dominating an edge into `child` decide it
    /// (libpcap's `fold_edge`): the same jump on the same accumulator
    /// value has the same outcome; after `A = a` held, `A = b` fails. The
    /// dominating edges are the path from edge node `e` to the root of
    /// `facts`; the first of them from the root that decides, decides.
    fn decided(&self, child: NodeId, e: u32, facts: &FactTree, round: u64) -> Option<bool> {
        facts.decide(&self.block(child)?.leaf.key.in_round(round), e)
    }

    /// libpcap's first optimizer pass (`opt_loop(.., 0)`), to a fixed
    /// point: each round computes dominators, moves edges (`opt_j`), then
    /// pulls tests of an already loaded value up or- and and-chains
    /// (`or_pullup`, `and_pullup`).
    ///
    /// Dominators are kept as trees, not sets: a block's dominators are
    /// its ancestors in the dominator tree, and the edges dominating it
    /// are the path to the root of the edge-dominator tree
    /// ([`FactTree`]); the intersection over a block's predecessors is
    /// their nearest common ancestor (binary lifting, `O(log n)`). A
    /// round is so `O(n log n)` plus the edge moves themselves, where
    /// the sets were `O(n^2)` in time and memory. The pull-ups' walks
    /// remain `O(n)` a block; past [`MAX_OPTIMIZER_WORK`] steps in all
    /// the filter is refused ([`Error::TooComplex`]).
    fn optimize(&mut self, root: NodeId) -> Result<(), Error> {
        // A user's equality leaves another value in the first round.
        let (a_first, a_later) = (self.a_values(0), self.a_values(1));
        // Steps of work: a round's blocks, each edge moved by opt_j, each
        // step of a pull-up's walk. A round moves some edge or is the last,
        // so the budget also bounds the rounds.
        let mut work = 0u64;
        // libpcap's loop detection: rounds in a row that only moved edges.
        let mut edge_moves_only = 0u32;
        for round in 0u64.. {
            let levels = self.levels(root);
            let n = self.blocks.len();
            work += n as u64;
            // Block dominator tree: node `n` is a virtual root.
            let mut dom = Lift::new(n + 1);
            let mut facts = FactTree::new(n, &self.blocks, round);
            let mut dom_acc: Vec<Option<u32>> = vec![None; n];
            let mut fact_acc: Vec<Option<u32>> = vec![None; n];
            let mut tip: Vec<Option<u32>> = vec![None; n];
            if self.block(root).is_some() {
                dom_acc[root as usize] = Some(n as u32);
                fact_acc[root as usize] = Some(FactTree::ROOT);
            }
            for list in levels.iter().rev() {
                for &id in list {
                    let (Some(d), Some(f)) = (dom_acc[id as usize], fact_acc[id as usize]) else {
                        continue;
                    };
                    dom.set_parent(id, d);
                    tip[id as usize] = Some(f);
                    for holds in [true, false] {
                        let to = self.edge(id, holds);
                        let e = facts.add_edge(id, holds, f);
                        if self.block(to).is_none() {
                            continue;
                        }
                        let slot = &mut fact_acc[to as usize];
                        *slot = Some(match *slot {
                            None => e,
                            Some(old) => facts.lift.nca(old, e),
                        });
                        let slot = &mut dom_acc[to as usize];
                        *slot = Some(match *slot {
                            None => id,
                            Some(old) => dom.nca(old, id),
                        });
                    }
                }
            }
            facts.finish();
            let mut changed = false;
            // Progress other than edge moves, as libpcap counts it: its
            // peephole's rewrites, a jump decided, a block whose edges
            // agree skipped. A rewrite is a change too, so the rounds that
            // key a block by what the peephole has made of it all run.
            let mut progress = false;
            for &id in levels.iter().flatten() {
                let b = self.blocks[id as usize].as_mut().expect("a block");
                if round < u64::from(b.leaf.peephole_rounds) {
                    (changed, progress) = (true, true);
                }
                if let Late::Early { holds, round: at } = b.leaf.late
                    && at == round
                {
                    let to = if holds { b.then } else { b.els };
                    progress |= b.then != b.els;
                    (b.then, b.els) = (to, to);
                    changed = true;
                }
            }
            // opt_j, bottom-up.
            for list in levels.iter().skip(1) {
                for &id in list {
                    if tip[id as usize].is_none() {
                        continue;
                    }
                    for holds in [true, false] {
                        let mut succ = self.edge(id, holds);
                        let Some(sb) = self.block(succ) else { continue };
                        if sb.then == sb.els {
                            succ = sb.then;
                            changed = true;
                            progress = true;
                        }
                        let e = FactTree::edge_node(id, holds);
                        while let Some(out) = self.decided(succ, e, &facts, round) {
                            work += 1;
                            succ = self.edge(succ, out);
                            changed = true;
                        }
                        self.set_edge(id, holds, succ);
                    }
                }
            }
            // Pull-ups, with predecessors after the edge moves and the
            // dominators from before them, as libpcap has them.
            let mut preds: Vec<Vec<(NodeId, bool)>> = vec![Vec::new(); n];
            for list in levels.iter().skip(1) {
                for &id in list {
                    for holds in [true, false] {
                        let to = self.edge(id, holds);
                        if self.block(to).is_some() {
                            preds[to as usize].push((id, holds));
                        }
                    }
                }
            }
            // Listed last-first, as libpcap links them.
            for p in &mut preds {
                p.reverse();
            }
            // The pull-ups ask "does `b` dominate `d`" at every step of
            // their walks: two comparisons on the tree's preorder, where
            // binary lifting's walk up the tree missed the cache.
            let links = (0..n as u32).filter_map(|id| Some((id, dom_acc[id as usize]?)));
            let (tin, tout, _) = preorder(
                n + 1,
                n as u32,
                links.filter(|&(id, _)| tip[id as usize].is_some()),
            );
            let dominates = |b: NodeId, d: NodeId| {
                b == d
                    || (tip[d as usize].is_some()
                        && tin[b as usize] <= tin[d as usize]
                        && tin[d as usize] <= tout[b as usize])
            };
            let a = if round == 0 { &a_first } else { &a_later };
            for list in levels.iter().skip(1) {
                for &b in list {
                    for or in [true, false] {
                        changed |= self.pullup(b, or, &preds[b as usize], a, &mut work, dominates);
                    }
                    if work > MAX_OPTIMIZER_WORK {
                        return Err(Error::TooComplex {
                            limit: MAX_OPTIMIZER_WORK,
                        });
                    }
                }
            }
            if work > MAX_OPTIMIZER_WORK {
                return Err(Error::TooComplex {
                    limit: MAX_OPTIMIZER_WORK,
                });
            }
            if !changed {
                break;
            }
            // libpcap ends the pass after 100 rounds in a row of edge moves
            // alone: it takes them for a cycle (they can be one).
            edge_moves_only = if progress { 0 } else { edge_moves_only + 1 };
            if edge_moves_only >= 100 {
                break;
            }
        }
        Ok(())
    }

    /// libpcap's `or_pullup` (`or`) or `and_pullup`: in a chain of tests
    /// below `b` sharing one exit (the true exit for `or`), move the first
    /// test of the accumulator value `b`'s predecessors left above the
    /// first test of another value.
    fn pullup(
        &mut self,
        b: NodeId,
        or: bool,
        preds: &[(NodeId, bool)],
        a: &[u32],
        work: &mut u64,
        dominates: impl Fn(NodeId, NodeId) -> bool,
    ) -> bool {
        let same_a = |x: NodeId, y: NodeId| a[x as usize] == a[y as usize];
        let Some(&(p0, e0)) = preds.first() else {
            return false;
        };
        if preds.iter().any(|&(p, _)| !same_a(p, p0)) {
            return false;
        }
        if self.block(b).is_none() || self.edge(p0, e0) != b {
            return false;
        }
        // `exit` is the shared exit; `next` walks the chain.
        let exit = self.edge(b, or);
        let mut diff_at: Option<NodeId> = None; // None: the predecessors' edges
        let mut diff = b;
        loop {
            *work += 1;
            if self.block(diff).is_none() || self.edge(diff, or) != exit || !dominates(b, diff) {
                return false;
            }
            if !same_a(diff, p0) {
                break;
            }
            diff_at = Some(diff);
            diff = self.edge(diff, !or);
        }
        let mut same_at = diff;
        let mut same = self.edge(diff, !or);
        loop {
            *work += 1;
            if self.block(same).is_none() || self.edge(same, or) != exit || !dominates(b, same) {
                return false;
            }
            if same_a(same, p0) {
                break;
            }
            same_at = same;
            same = self.edge(same, !or);
        }
        let after = self.edge(same, !or);
        self.set_edge(same_at, !or, after);
        self.set_edge(same, !or, diff);
        match diff_at {
            None => {
                for &(p, e) in preds {
                    if self.edge(p, e) == b {
                        self.set_edge(p, e, same);
                    }
                }
            }
            Some(d) => self.set_edge(d, !or, same),
        }
        true
    }
}

/// A tree grown parents first that answers nearest-common-ancestor and
/// ancestor queries in `O(log n)` by binary lifting.
struct Lift {
    /// `up[v * log + k]`: the `2^k`-th ancestor of `v` (the root is its
    /// own).
    up: Vec<u32>,
    depth: Vec<u32>,
    log: usize,
}

impl Lift {
    /// A tree of `n` nodes, each its own root until given a parent.
    fn new(n: usize) -> Self {
        let log = (usize::BITS - n.leading_zeros()) as usize + 1;
        let mut up = vec![0u32; n * log];
        for v in 0..n {
            up[v * log..(v + 1) * log].fill(v as u32);
        }
        Lift {
            up,
            depth: vec![0; n],
            log,
        }
    }

    fn set_parent(&mut self, v: u32, p: u32) {
        let (v, p, log) = (v as usize, p as usize, self.log);
        self.depth[v] = self.depth[p] + 1;
        self.up[v * log] = p as u32;
        for k in 1..log {
            let mid = self.up[v * log + k - 1] as usize;
            self.up[v * log + k] = self.up[mid * log + k - 1];
        }
    }

    /// `v`'s ancestor at depth `d` (at most `v`'s own).
    fn at_depth(&self, mut v: u32, d: u32) -> u32 {
        let mut diff = self.depth[v as usize] - d;
        let mut k = 0;
        while diff > 0 {
            if diff & 1 == 1 {
                v = self.up[v as usize * self.log + k];
            }
            diff >>= 1;
            k += 1;
        }
        v
    }

    fn nca(&self, a: u32, b: u32) -> u32 {
        let (da, db) = (self.depth[a as usize], self.depth[b as usize]);
        let (mut a, mut b) = if da >= db {
            (self.at_depth(a, db), b)
        } else {
            (a, self.at_depth(b, da))
        };
        if a == b {
            return a;
        }
        for k in (0..self.log).rev() {
            let (ua, ub) = (
                self.up[a as usize * self.log + k],
                self.up[b as usize * self.log + k],
            );
            if ua != ub {
                (a, b) = (ua, ub);
            }
        }
        self.up[a as usize * self.log]
    }
}

/// Numbers the tree of `n` nodes under `root` whose `(child, parent)`
/// links are `links`, in preorder: `tin[v]..=tout[v]` spans `v`'s
/// subtree, so "`u` is `v` or an ancestor of it" is two comparisons.
/// Returns the numbers and the nodes in preorder; a node off the tree
/// keeps 0s.
fn preorder(
    n: usize,
    root: u32,
    links: impl IntoIterator<Item = (u32, u32)>,
) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
    let mut children: Vec<Vec<u32>> = vec![Vec::new(); n];
    for (c, p) in links {
        children[p as usize].push(c);
    }
    let (mut tin, mut tout) = (vec![0; n], vec![0; n]);
    let mut order = Vec::new();
    let mut clock = 0;
    let mut stack = vec![(root, false)];
    while let Some((v, done)) = stack.pop() {
        if done {
            tout[v as usize] = clock;
            continue;
        }
        clock += 1;
        tin[v as usize] = clock;
        order.push(v);
        stack.push((v, true));
        stack.extend(children[v as usize].iter().rev().map(|&c| (c, false)));
    }
    (tin, tout, order)
}

/// The edge-dominator tree of one round: node 0 is the root (no edge),
/// node `1 + 2 * block + holds` the edge `(block, holds)`, whose parent
/// is the deepest edge dominating `block`. The edges dominating a block
/// are the path from its deepest one to the root, root first.
///
/// `fold_edge` asks, for an edge and a test, for the first edge from the
/// root on that path that decides the test: one of the test's group (the
/// same accumulator value and jump) with the same constant, or, for an
/// equality, one of its group that held. [`FactTree::finish`] lists each
/// such class of edges in preorder with the outermost member of each
/// nested chain, so that the question is a binary search (`O(log n)`),
/// not a walk along the path.
struct FactTree {
    lift: Lift,
    /// Each block's group (two tests of one group decide each other).
    group: Vec<u32>,
    groups: HashMap<Key, u32>,
    /// Each block's constant.
    value: Vec<u32>,
    /// The edge nodes added, in order.
    added: Vec<u32>,
    /// Preorder interval of each edge node in the tree.
    tin: Vec<u32>,
    tout: Vec<u32>,
    /// Per class, its edge nodes in preorder and each one's outermost
    /// ancestor in the class: `(group, value, false)` for the edges of
    /// one constant, `(group, 0, true)` for the edges that held.
    classes: HashMap<(u32, u32, bool), Vec<(u32, u32)>>,
}

impl FactTree {
    const ROOT: u32 = 0;

    /// A key with its constant cleared: equal for tests of one group.
    fn group_key(k: &Key) -> Key {
        let mut k = *k;
        match &mut k {
            Key::Prim { value, .. } | Key::Raw { value, .. } => *value = 0,
            Key::Arith { k, .. } => *k = 0,
            // The constant is part of the accumulator's value.
            Key::Diff { .. } => {}
        }
        k
    }

    fn new(n: usize, blocks: &[Option<Block>], round: u64) -> Self {
        let mut groups = HashMap::new();
        let mut group = Vec::with_capacity(n);
        let mut value = Vec::with_capacity(n);
        for b in blocks {
            match b {
                Some(b) => {
                    let next = groups.len() as u32;
                    let key = b.leaf.key.in_round(round);
                    group.push(*groups.entry(Self::group_key(&key)).or_insert(next));
                    value.push(key.value());
                }
                None => {
                    group.push(u32::MAX);
                    value.push(0);
                }
            }
        }
        FactTree {
            lift: Lift::new(1 + 2 * n),
            group,
            groups,
            value,
            added: Vec::new(),
            tin: Vec::new(),
            tout: Vec::new(),
            classes: HashMap::new(),
        }
    }

    fn edge_node(block: NodeId, holds: bool) -> u32 {
        1 + 2 * block + u32::from(holds)
    }

    fn edge(node: u32) -> (NodeId, bool) {
        ((node - 1) / 2, (node - 1) % 2 == 1)
    }

    /// Adds edge `(block, holds)` below `parent`; returns its node.
    fn add_edge(&mut self, block: NodeId, holds: bool, parent: u32) -> u32 {
        let e = Self::edge_node(block, holds);
        self.lift.set_parent(e, parent);
        self.added.push(e);
        e
    }

    /// Numbers the tree in preorder and lists the classes, once every
    /// edge is added.
    fn finish(&mut self) {
        let n = self.lift.depth.len();
        let parent = |e: u32| self.lift.up[e as usize * self.lift.log];
        let links: Vec<(u32, u32)> = self.added.iter().map(|&e| (e, parent(e))).collect();
        let (tin, tout, mut order) = preorder(n, Self::ROOT, links);
        (self.tin, self.tout) = (tin, tout);
        order.retain(|&v| v != Self::ROOT);
        // Preorder keeps each class sorted; a stack of the members that
        // contain the current one gives its outermost ancestor.
        let mut open: HashMap<(u32, u32, bool), Vec<u32>> = HashMap::new();
        for v in order {
            let (b, holds) = Self::edge(v);
            let (g, value) = (self.group[b as usize], self.value[b as usize]);
            let mut classes = vec![(g, value, false)];
            if holds {
                classes.push((g, 0, true));
            }
            for c in classes {
                let stack = open.entry(c).or_default();
                while stack.last().is_some_and(|&u| !self.contains(u, v)) {
                    stack.pop();
                }
                let top = stack.first().copied().unwrap_or(v);
                stack.push(v);
                self.classes.entry(c).or_default().push((v, top));
            }
        }
    }

    /// Whether `u` is `v` or an ancestor of it.
    fn contains(&self, u: u32, v: u32) -> bool {
        self.tin[u as usize] <= self.tin[v as usize]
            && self.tin[v as usize] <= self.tout[u as usize]
    }

    /// The outermost member of `class` on the path from `e` to the root.
    fn outermost(&self, class: (u32, u32, bool), e: u32) -> Option<u32> {
        let members = self.classes.get(&class)?;
        // The last member numbered at or before `e`: if any member is an
        // ancestor of `e`, this one lies inside it, so they share the
        // outermost ancestor.
        let at = members.partition_point(|&(u, _)| self.tin[u as usize] <= self.tin[e as usize]);
        let (_, top) = *members.get(at.checked_sub(1)?)?;
        self.contains(top, e).then_some(top)
    }

    /// libpcap's `fold_edge` for a test with key `k` entered through
    /// edge node `e`: the outcome the first deciding edge from the root
    /// gives, if any.
    fn decide(&self, k: &Key, e: u32) -> Option<bool> {
        let g = *self.groups.get(&Self::group_key(k))?;
        let same = self.outermost((g, k.value(), false), e);
        let held = if k.cmp() == Cmp::Eq {
            self.outermost((g, 0, true), e)
        } else {
            None
        };
        let depth = |u: u32| self.lift.depth[u as usize];
        match (same, held) {
            (Some(s), Some(h)) if depth(h) < depth(s) => Some(false),
            (Some(s), _) => Some(Self::edge(s).1),
            (None, Some(_)) => Some(false),
            (None, None) => None,
        }
    }
}

/// The most steps of work libpcap's first optimizer pass may take on one
/// filter ([`Error::TooComplex`] past it): a step is a block of a round,
/// an edge moved, or a step of a pull-up's walk down a chain. The walks
/// make a chain of `k` alternatives that each test several fields about
/// `k²` steps, and a client's filter is compiled on the daemon's CPU:
/// the budget holds one filter to about a second of it at worst, and
/// admits 1,000 `port` or 3,000 `udp dst port` alternatives (22 and 9
/// million steps; libpcap 1.10 takes minutes to optimize the first).
pub const MAX_OPTIMIZER_WORK: u64 = 1 << 25;

/// The final graph: identical nodes shared (libpcap's `intern_blocks`).
/// A test whose edges agree is kept: its load still rejects a short
/// packet, as the block libpcap keeps does.
struct Builder {
    nodes: Vec<Node>,
    memo: HashMap<Node, NodeId>,
}

impl Builder {
    fn test(&mut self, test: Test, then: NodeId, els: NodeId) -> NodeId {
        let node = Node::Test { test, then, els };
        if let Some(&id) = self.memo.get(&node) {
            return id;
        }
        let id = self.nodes.len() as NodeId;
        self.nodes.push(node);
        self.memo.insert(node, id);
        id
    }
}

/// Lowers a parsed filter to its decision graph.
///
/// A filter libpcap's optimizer refuses for its arithmetic (see
/// [`lower_checked`]) lowers all the same, to the program of the tests it
/// keeps. A filter past the optimizer's budget has no program
/// ([`Error::TooComplex`]).
pub fn lower(e: &Expr) -> Result<Program, Error> {
    match lower_and_check(e) {
        (_, Some(err @ (Error::TooComplex { .. } | Error::Unsupported { .. }))) => Err(err),
        (p, _) => Ok(p),
    }
}

/// Lowers a parsed filter, or refuses it where libpcap's optimizer does:
/// a computed comparison it still reaches after its first pass whose
/// constant divisor folds to zero or whose constant shift count exceeds
/// 31 ([`Error::Arithmetic`]).
pub fn lower_checked(e: &Expr) -> Result<Program, Error> {
    match lower_and_check(e) {
        (p, None) => Ok(p),
        (_, Some(err)) => Err(err),
    }
}

fn lower_and_check(e: &Expr) -> (Program, Option<Error>) {
    let raw = has_geneve(e);
    let mut blocks = Blocks {
        blocks: vec![None, None],
        keep: raw,
    };
    let mut values = Values {
        raw,
        ..Values::default()
    };
    let root = blocks.lower(&cond(e, &mut values), ACCEPT, REJECT);
    if raw {
        return unoptimized(&blocks, root, values);
    }
    if let Err(e) = blocks.optimize(root) {
        return (Program::reject_all(), Some(e));
    }
    // A poisoned block refuses the filter if it is reachable in the round
    // that refuses it: the first pass's graph for round 0, with the second
    // pass's earlier decisions after. Of several, the earliest round's, and
    // of one round's the first block libpcap visits (from the root's level
    // down, `opt_blks`).
    let mut reach: HashMap<u32, Vec<bool>> = HashMap::new();
    let refused = (blocks.levels(root).iter().rev().flatten())
        .filter_map(|&id| {
            let (column, why) = blocks.blocks[id as usize]?.leaf.poison?;
            let reached = why.round == 0
                || reach
                    .entry(why.round)
                    .or_insert_with(|| blocks.decided_reach(root, why.round))[id as usize];
            reached.then_some((column, why))
        })
        .min_by_key(|(_, why)| why.round)
        .map(|(column, why)| Error::Arithmetic {
            column,
            reason: why.reason,
        });
    // The second pass (`opt_loop(..., 1)`) folds constants without
    // moving edges; then identical blocks merge.
    let mut b = Builder {
        nodes: vec![Node::Reject, Node::Accept],
        memo: HashMap::new(),
    };
    // Each block's node in the program, and its identity as a libpcap
    // block after `intern_blocks`, as (then, else) identities: a block the
    // second pass made constant has no load, so the program skips it, but
    // libpcap keeps it as a block of its own.
    let n = blocks.blocks.len();
    let mut map: Vec<NodeId> = (0..n as NodeId).collect();
    let mut ident: Vec<u32> = (0..n as u32).collect();
    type IdentKey = (Option<Test>, Cmp, u32, u32, u32);
    let mut idents: HashMap<IdentKey, u32> = HashMap::new();
    // Per identity: its (then, else) identities, its node in the program
    // and the test whose load it performs, if any.
    let mut ident_edges: Vec<(u32, u32)> = vec![(0, 0), (1, 1)];
    let mut ident_node: Vec<(NodeId, Option<Test>)> = vec![(REJECT, None), (ACCEPT, None)];
    let levels = blocks.levels(root);
    for &id in levels.iter().flatten() {
        let id = id as usize;
        let Some(Block { leaf, then, els }) = blocks.blocks[id] else {
            continue;
        };
        let (t, f) = (then as usize, els as usize);
        let (t, f) = if leaf.invert && leaf.late == Late::Keep {
            (f, t)
        } else {
            (t, f)
        };
        let (node, key, edges, load) = match leaf.late {
            Late::Constant(holds) => {
                let to = if holds { t } else { f };
                let key = (None, leaf.test.cmp, leaf.test.value, ident[to], ident[to]);
                (map[to], key, (ident[to], ident[to]), None)
            }
            Late::Decided(holds) => {
                let to = if holds { t } else { f };
                let key = (Some(leaf.test), leaf.test.cmp, 0, ident[to], ident[to]);
                let node = b.test(leaf.test, map[to], map[to]);
                (node, key, (ident[to], ident[to]), Some(leaf.test))
            }
            Late::Keep | Late::Early { .. } => {
                let key = (Some(leaf.test), leaf.test.cmp, 0, ident[t], ident[f]);
                let node = b.test(leaf.test, map[t], map[f]);
                (node, key, (ident[t], ident[f]), Some(leaf.test))
            }
        };
        map[id] = node;
        ident[id] = *idents.entry(key).or_insert_with(|| {
            ident_edges.push(edges);
            ident_node.push((node, load));
            (ident_edges.len() - 1) as u32
        });
    }
    // `opt_root`: a chain of blocks with agreeing edges from the root is
    // skipped; if it ends in a verdict, that is the program, loads and
    // all dropped; otherwise the root block's own load moves in front of
    // the first real test, and the other skipped blocks' loads are gone.
    let first = ident[root as usize];
    let mut r = first;
    while r > 1 && ident_edges[r as usize].0 == ident_edges[r as usize].1 {
        r = ident_edges[r as usize].0;
    }
    let root = if r <= 1 {
        r
    } else if r == first {
        map[root as usize]
    } else {
        let to = ident_node[r as usize].0;
        match ident_node[first as usize].1 {
            Some(load) => b.test(load, to, to),
            None => to,
        }
    };
    let mut p = finish(&b.nodes, root);
    p.values = values.list;
    (p, refused)
}

/// Whether the filter has a `geneve` (which turns libpcap's optimizer
/// off for the whole filter: gen_geneve_offsets sets `no_optimize`).
fn has_geneve(e: &Expr) -> bool {
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        match e {
            Expr::And(a, b) | Expr::Or(a, b) => stack.extend([&**a, &**b]),
            Expr::Not(a) => stack.push(a),
            Expr::Prim(Primitive::Geneve { .. }) => return true,
            Expr::Prim(_) => {}
        }
    }
    false
}

/// The program of a filter libpcap compiles without its optimizer (one
/// with a `geneve`): gencode's blocks as they are, every test loading
/// (one whose edges agree too), identical tests shared. Refused if a
/// test reading the encapsulated packet can be reached without passing
/// the `geneve`'s last test ([`check_geneve_gate`]).
fn unoptimized(blocks: &Blocks, root: NodeId, values: Values) -> (Program, Option<Error>) {
    if let Err(e) = check_geneve_gate(blocks, root, &values) {
        return (Program::reject_all(), Some(e));
    }
    let mut b = Builder {
        nodes: vec![Node::Reject, Node::Accept],
        memo: HashMap::new(),
    };
    let mut map: Vec<NodeId> = (0..blocks.blocks.len() as NodeId).collect();
    for (id, block) in blocks.blocks.iter().enumerate() {
        let Some(Block { leaf, then, els }) = *block else {
            continue;
        };
        let (t, f) = if leaf.invert {
            (els, then)
        } else {
            (then, els)
        };
        map[id] = b.test(leaf.test, map[t as usize], map[f as usize]);
    }
    let mut p = finish(&b.nodes, map[root as usize]);
    p.values = values.list;
    (p, None)
}

/// libpcap reads everything after a `geneve` at offsets its offsets
/// block stores in scratch memory when the `geneve` matches; on a path
/// where it did not (`geneve or ip`, `not geneve and tcp`), BPF's scratch
/// memory is whatever it was (libpcap's `bpf_filter` leaves it
/// uninitialised, and the kernel refuses such a program), so the verdict
/// is not defined. dpf refuses such a filter: every test that reads the
/// encapsulated packet must be reached only through the `geneve`'s gate.
fn check_geneve_gate(blocks: &Blocks, root: NodeId, values: &Values) -> Result<(), Error> {
    let reads_inner = |ops: &[Op]| {
        ops.iter()
            .any(|op| matches!(op, Op::Load(LoadBase::Geneve(_), _)))
    };
    let mut seen = vec![false; blocks.blocks.len()];
    let mut stack = vec![root];
    while let Some(id) = stack.pop() {
        let Some(b) = blocks.block(id) else { continue };
        if std::mem::replace(&mut seen[id as usize], true) {
            continue;
        }
        if let Base::Value(i) = b.leaf.test.field.base {
            let ops = &values.list[i as usize];
            if is_geneve_gate(ops) {
                continue;
            }
            if reads_inner(ops) {
                return Err(Error::Unsupported {
                    column: values.geneve.unwrap_or(1),
                    feature: "a primitive after \"geneve\" that is tested when the \"geneve\" \
                              has not matched (libpcap then reads the encapsulated packet's \
                              offsets from scratch memory nothing set, so its verdict is \
                              undefined)"
                        .into(),
                });
            }
        }
        stack.extend([b.then, b.els]);
    }
    Ok(())
}

/// Renumbers a builder graph (children first) into a [`Program`] (root
/// first, every edge to a higher index or to a leaf), keeping only the
/// nodes reachable from `root`.
fn finish(nodes: &[Node], root: NodeId) -> Program {
    let mut reach = vec![false; nodes.len()];
    reach[root as usize] = true;
    for id in (2..nodes.len()).rev() {
        if let (true, Node::Test { then, els, .. }) = (reach[id], nodes[id]) {
            reach[then as usize] = true;
            reach[els as usize] = true;
        }
    }
    // Higher builder index = nearer the root.
    let order: Vec<usize> = (2..nodes.len()).rev().filter(|&i| reach[i]).collect();
    let mut map = vec![0 as NodeId; nodes.len()];
    map[1] = ACCEPT;
    for (k, &i) in order.iter().enumerate() {
        map[i] = 2 + k as NodeId;
    }
    let mut out = vec![Node::Reject, Node::Accept];
    for &i in &order {
        let Node::Test { test, then, els } = nodes[i] else {
            unreachable!("tests only above 1")
        };
        out.push(Node::Test {
            test,
            then: map[then as usize],
            els: map[els as usize],
        });
    }
    Program {
        nodes: out,
        root: map[root as usize],
        values: Vec::new(),
    }
}

fn node_name(id: NodeId) -> String {
    match id {
        REJECT => "reject".into(),
        ACCEPT => "accept".into(),
        n => format!("{n}"),
    }
}

/// A readable listing of a program's decision graph, one test per line,
/// as `fastpath filter check` prints it:
///
/// ```text
/// root 2
///    2: ether[12:2] = 0x800 ? 3 : reject
///    3: ether[23:1] = 0x6 ? accept : reject
/// ```
///
/// `ether[o:s]` counts from the start of the frame; `tp[o:s]` from the
/// end of the IPv4 header (14 + 4 × IHL). `&` is a mask, `& v != 0` a bit
/// test.
pub fn dump(p: &Program) -> String {
    let mut s = format!("root {}\n", node_name(p.root));
    for (id, node) in p.nodes.iter().enumerate().skip(2) {
        let Node::Test { test, then, els } = node else {
            continue;
        };
        let mut field = match test.field.base {
            Base::Link => format!("ether[{}:{}]", test.field.offset, test.field.size as u8),
            Base::Transport => format!("tp[{}:{}]", test.field.offset, test.field.size as u8),
            Base::Value(i) => format!("value{i}"),
        };
        if test.mask != u32::MAX {
            field = format!("({field} & {:#x})", test.mask);
        }
        let cond = match test.cmp {
            Cmp::Eq => format!("{field} = {:#x}", test.value),
            Cmp::Gt => format!("{field} > {:#x}", test.value),
            Cmp::Ge => format!("{field} >= {:#x}", test.value),
            Cmp::Set => format!("{field} & {:#x} != 0", test.value),
        };
        let _ = writeln!(
            s,
            "{id:>4}: {cond} ? {} : {}",
            node_name(*then),
            node_name(*els)
        );
    }
    for (i, ops) in p.values.iter().enumerate() {
        let _ = writeln!(s, "value{i} = {}", value_text(ops));
    }
    s
}

/// A computed value's text, every operator parenthesized: `len`,
/// `ether[e:s]` for a load `e` bytes into the frame, `tp[e:s]` for one `e`
/// bytes past the IPv4 header (the sum wrapping at 32 bits).
fn value_text(ops: &[Op]) -> String {
    let mut stack: Vec<String> = Vec::new();
    for op in ops {
        let sym = match *op {
            Op::Const(k) => {
                stack.push(format!("{k:#x}"));
                continue;
            }
            Op::Len => {
                stack.push("len".into());
                continue;
            }
            Op::Load(base, size) => {
                let i = stack.pop().unwrap_or_default();
                stack.push(match base {
                    LoadBase::At(0) => format!("ether[{i}:{}]", size as u8),
                    LoadBase::At(k) => format!("ether[{k:#x} + {i}:{}]", size as u8),
                    LoadBase::Transport(0) => format!("tp[{i}:{}]", size as u8),
                    LoadBase::Transport(d) => format!("tp{d}[{i}:{}]", size as u8),
                    LoadBase::Geneve(g) => {
                        let layer = match g.layer {
                            GeneveLayer::Header => "geneve",
                            GeneveLayer::Link => "inner.link",
                            GeneveLayer::Type => "inner.type",
                            GeneveLayer::Payload => "inner.payload",
                            GeneveLayer::Transport => "inner.tp",
                        };
                        match g.add {
                            0 => format!("{layer}[{i}:{}]", size as u8),
                            a => format!("{layer}[{i} + {a:#x}:{}]", size as u8),
                        }
                    }
                });
                continue;
            }
            Op::Neg => {
                let a = stack.pop().unwrap_or_default();
                stack.push(format!("-({a})"));
                continue;
            }
            Op::Add => "+",
            Op::Sub => "-",
            Op::Mul => "*",
            Op::Div => "/",
            Op::Mod => "%",
            Op::And => "&",
            Op::Or => "|",
            Op::Xor => "^",
            Op::Shl => "<<",
            Op::Shr => ">>",
            Op::Gt => ">",
            Op::Ge => ">=",
        };
        let b = stack.pop().unwrap_or_default();
        let a = stack.pop().unwrap_or_default();
        stack.push(format!("({a} {sym} {b})"));
    }
    stack.pop().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syntax::parse;

    fn prog(src: &str) -> Program {
        lower(&parse(src).unwrap()).unwrap()
    }

    #[test]
    fn edges_point_forward_and_nodes_are_unique() {
        for src in [
            "tcp",
            "port 80 or portrange 10-20",
            "host 1.2.3.4 and not net 10.0.0.0/8",
            "tcp[13] & 0x12 != 0 or udp[0:2] < 7",
        ] {
            let p = prog(src);
            assert!(p.root == REJECT || p.root == ACCEPT || p.root == 2);
            let mut seen = std::collections::HashSet::new();
            for (i, n) in p.nodes.iter().enumerate().skip(2) {
                let Node::Test { then, els, .. } = *n else {
                    panic!("leaf at {i}")
                };
                for e in [then, els] {
                    assert!(e <= ACCEPT || e as usize > i, "{src}: {i} -> {e}");
                }
                assert!(seen.insert(*n), "{src}: duplicate node {i}");
            }
        }
    }

    #[test]
    fn tautologies_fold_away_with_their_loads() {
        // libpcap: "ret #65535" for both, so even a 1-byte packet matches.
        assert_eq!(prog("ether[100] = 1 or not ether[100] = 1").root, ACCEPT);
        assert_eq!(prog("ether[100] & 0 = 0").root, ACCEPT);
        assert_eq!(prog("ether[1] & 0xffffffff != 0").root, ACCEPT);
        assert_eq!(prog("ether[100] & 0 = 1").root, REJECT);
        // jge #0 is kept: the load still rejects short packets.
        assert!(!prog("ether[100] >= 0").matches(&[0; 10]));
    }

    #[test]
    fn tcp_is_three_alternatives() {
        let p = prog("tcp");
        let mut v4 = vec![0u8; 60];
        v4[12] = 0x08;
        v4[14] = 0x45;
        v4[23] = 6;
        assert!(p.matches(&v4));
        let mut v6 = vec![0u8; 60];
        v6[12] = 0x86;
        v6[13] = 0xdd;
        v6[20] = 44;
        v6[54] = 6;
        assert!(p.matches(&v6));
        v6[54] = 17;
        assert!(!p.matches(&v6));
    }

    #[test]
    fn dump_lists_every_test() {
        let d = dump(&prog("ip proto 6"));
        assert_eq!(
            d,
            "root 2\n   2: ether[12:2] = 0x800 ? 3 : reject\n   3: ether[23:1] = 0x6 ? accept : reject\n"
        );
    }
}
