//! One filter as a decision graph over packet-field tests, and its
//! reference semantics.
//!
//! This is the representation every later phase starts from: the parser
//! lowers a filter expression into a [`Program`], the merger reads the
//! programs of a whole table, and the reference evaluator here defines
//! what a filter means.
//!
//! The semantics are libpcap's for DLT_EN10MB: a program is a DAG of
//! [`Test`] nodes evaluated from the root, each taking its `then` or
//! `else` edge, until [`Node::Accept`] or [`Node::Reject`]. A test whose
//! load reaches past the end of the packet aborts the whole program with
//! "no match", as a BPF load out of bounds does, even under a `not`.

/// The width of a packet field, in bytes; fields are big-endian.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Size {
    /// One byte.
    B = 1,
    /// Two bytes.
    H = 2,
    /// Four bytes.
    W = 4,
}

/// Where a field's offset counts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Base {
    /// The first byte of the Ethernet frame.
    Link,
    /// The first byte after the IPv4 header: 14 plus four times the low
    /// nibble of the frame's byte 14 (the IHL). Reading that byte is
    /// itself a load, which aborts when the frame is shorter than 15 bytes.
    Transport,
    /// Not a packet field but a value computed from the packet:
    /// [`Program::values`]`[i]` (the arithmetic of a comparison such as
    /// `ip[2:2] - ((ip[0] & 0xf) << 2) > 40`, or `len`). Its offset is 0
    /// and its size [`Size::W`]. Such a test is never merged into the
    /// decision trie: it stays in the filter's residual program.
    Value(u32),
}

/// Where a computed load's index counts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LoadBase {
    /// A fixed byte of the frame: the load reads at `index + k` (computed
    /// without wrapping, as BPF's indexed load checks its bounds).
    At(u32),
    /// The IPv4 payload `d` bytes further into the frame than usual
    /// (behind `d / 4` VLAN tags): the load reads at `14 + d + ((index +
    /// 4 * IHL) mod 2^32)` with the IHL from byte `14 + d`, libpcap's
    /// `ldxb 4*([14+d]&0xf); add x; tax; ld [x + 14 + d]`.
    Transport(u32),
    /// A place in the packet a Geneve header carries (see [`Geneve`]):
    /// the load reads at `((index + base) mod 2^32) + add`, with the base
    /// computed from the packet, as libpcap 1.10 reads everything after
    /// `geneve` through the offsets its `gen_geneve_offsets` stores.
    Geneve(Geneve),
}

/// Where a Geneve frame's parts are, as libpcap 1.10's `gen_geneve`
/// finds them: the outer header is IPv4 or IPv6 (told by one field), UDP
/// follows it, and the Geneve header follows UDP; its option length and
/// protocol type place the inner packet. These values are meaningful
/// only in a packet the `geneve` primitive matched (libpcap reads them
/// from scratch memory only that match sets), which lowering guarantees
/// for every load that uses them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Geneve {
    /// The frame offset of the outer IPv4 or IPv6 header (14, plus 4 per
    /// VLAN tag, 8 in a PPPoE session).
    pub net: u32,
    /// The outer header is IPv4 when the field at this frame offset, of
    /// `v4_size`, masked with `v4_mask`, equals `v4_value` (the EtherType
    /// 0x0800, or the PPP protocol 0x21 in a PPPoE session), and IPv6
    /// otherwise.
    pub v4_at: u32,
    /// The width of that field.
    pub v4_size: Size,
    /// Its mask.
    pub v4_mask: u32,
    /// Its IPv4 value.
    pub v4_value: u32,
    /// Which of the Geneve frame's offsets the base is.
    pub layer: GeneveLayer,
    /// Added after the wrapping sum (libpcap's constant part of the
    /// offset: 4 per VLAN tag after `geneve`).
    pub add: u32,
}

/// The offsets libpcap computes after a Geneve header. With `g` the
/// Geneve header's offset (the outer IPv4 header's end, 14 + d + 4 × IHL,
/// plus 8 for UDP; or 14 + d + 40 + 8 behind IPv6), `e = g + 8 + 4 ×
/// (frame[g] & 0x3f)` the end of its options, and "Ethernet" meaning the
/// protocol type `frame[g + 2 .. g + 4]` is 0x6558 (Transparent Ethernet
/// Bridging):
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GeneveLayer {
    /// `g`, the Geneve header.
    Header,
    /// `e`, the inner link-layer header (`ether[...]`, MAC addresses).
    Link,
    /// The inner link-layer type: `e + 12` for Ethernet, else `g + 2`
    /// (the protocol type itself, read as an EtherType).
    Type,
    /// The inner link-layer payload: `e + 14` for Ethernet, else `e`.
    Payload,
    /// The inner IPv4 payload: the payload plus 4 × the IHL of the byte
    /// `add` bytes into it.
    Transport,
}

impl Geneve {
    /// The base offset in `pkt`, or `None` when a byte it reads is past
    /// the end.
    pub fn base(&self, pkt: &[u8]) -> Option<u64> {
        let byte =
            |at: u64| -> Option<u64> { pkt.get(usize::try_from(at).ok()?).map(|&b| u64::from(b)) };
        let field = |at: u64, size: Size| -> Option<u32> {
            let at = usize::try_from(at).ok()?;
            let bytes = pkt.get(at..at.checked_add(size as usize)?)?;
            Some(bytes.iter().fold(0u32, |v, &b| (v << 8) | u32::from(b)))
        };
        let net = u64::from(self.net);
        let v4 = field(u64::from(self.v4_at), self.v4_size)? & self.v4_mask == self.v4_value;
        let g = if v4 {
            net + 4 * (byte(net)? & 0x0f) + 8
        } else {
            net + 48
        };
        let e = g + 8 + 4 * (byte(g)? & 0x3f);
        let ethernet = || -> Option<bool> { Some(field(g + 2, Size::H)? == 0x6558) };
        Some(match self.layer {
            GeneveLayer::Header => g,
            GeneveLayer::Link => e,
            GeneveLayer::Type => {
                if ethernet()? {
                    e + 12
                } else {
                    g + 2
                }
            }
            GeneveLayer::Payload | GeneveLayer::Transport => {
                let pl = if ethernet()? { e + 14 } else { e };
                if self.layer == GeneveLayer::Payload {
                    pl
                } else {
                    pl + 4 * (byte(pl + u64::from(self.add))? & 0x0f)
                }
            }
        })
    }
}

/// One step of a computed value, in postfix order over a stack of 32-bit
/// unsigned integers (BPF's accumulator arithmetic: every result wraps
/// modulo 2^32).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    /// Pushes a constant.
    Const(u32),
    /// Pushes the packet's length on the wire (BPF's `ld #len`): the
    /// frame's length, or more where a capture cut the frame to its
    /// snaplen (see [`Program::matches_captured`]).
    Len,
    /// Pops an index and pushes the big-endian field of `size` bytes at
    /// the address it gives (see [`LoadBase`]); past the end of the frame,
    /// the whole filter rejects the packet.
    Load(LoadBase, Size),
    /// Pops `b`, then `a`, and pushes `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b`; a zero `b` makes the whole filter reject the packet.
    Div,
    /// `a % b`; a zero `b` makes the whole filter reject the packet.
    Mod,
    /// `a & b`.
    And,
    /// `a | b`.
    Or,
    /// `a ^ b`.
    Xor,
    /// `a << b`, and 0 for a count of 32 or more (libpcap 1.10's
    /// `bpf_filter`).
    Shl,
    /// `a >> b`, and 0 for a count of 32 or more.
    Shr,
    /// Pops `a` and pushes `-a` (modulo 2^32).
    Neg,
    /// `1` if `a > b` (unsigned), else `0`.
    Gt,
    /// `1` if `a >= b` (unsigned), else `0`.
    Ge,
}

/// Computes a value of [`Program::values`] for `pkt`, a packet of
/// `wire_len` bytes on the wire (what [`Op::Len`] pushes; loads are
/// bounded by `pkt`'s own length): `None` when a load is out of bounds or
/// a divisor is zero (the filter then rejects the packet), or when `ops`
/// is not a well-formed postfix sequence.
pub fn eval_value(ops: &[Op], pkt: &[u8], wire_len: u32) -> Option<u32> {
    let mut stack: Vec<u32> = Vec::with_capacity(8);
    for op in ops {
        let v = match *op {
            Op::Const(k) => k,
            Op::Len => wire_len,
            Op::Load(base, size) => {
                let i = stack.pop()?;
                let at = match base {
                    LoadBase::At(k) => u64::from(i) + u64::from(k),
                    LoadBase::Transport(d) => {
                        let ihl = u32::from(*pkt.get(14 + d as usize)? & 0x0f);
                        u64::from(i.wrapping_add(4 * ihl)) + 14 + u64::from(d)
                    }
                    LoadBase::Geneve(g) => {
                        // The base is small (at most a few hundred bytes
                        // past the frame's 64 KiB), so it fits in 32 bits.
                        let base = g.base(pkt)? as u32;
                        u64::from(i.wrapping_add(base)) + u64::from(g.add)
                    }
                };
                let at = usize::try_from(at).ok()?;
                let bytes = pkt.get(at..at.checked_add(size as usize)?)?;
                bytes.iter().fold(0u32, |v, &b| (v << 8) | u32::from(b))
            }
            Op::Neg => stack.pop()?.wrapping_neg(),
            bin => {
                let b = stack.pop()?;
                let a = stack.pop()?;
                match bin {
                    Op::Add => a.wrapping_add(b),
                    Op::Sub => a.wrapping_sub(b),
                    Op::Mul => a.wrapping_mul(b),
                    Op::Div => a.checked_div(b)?,
                    Op::Mod => a.checked_rem(b)?,
                    Op::And => a & b,
                    Op::Or => a | b,
                    Op::Xor => a ^ b,
                    Op::Shl => a.checked_shl(b).unwrap_or(0),
                    Op::Shr => a.checked_shr(b).unwrap_or(0),
                    Op::Gt => u32::from(a > b),
                    Op::Ge => u32::from(a >= b),
                    _ => unreachable!("unary and leaf operations are matched above"),
                }
            }
        };
        stack.push(v);
    }
    match stack[..] {
        [v] => Some(v),
        _ => None,
    }
}

/// A packet field: where it is and how wide.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Field {
    /// What `offset` counts from.
    pub base: Base,
    /// The offset from the base, in bytes.
    pub offset: u32,
    /// The width.
    pub size: Size,
}

/// How a test compares the masked field with its value (BPF's jumps).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Cmp {
    /// `field & mask == value`.
    Eq,
    /// `field & mask > value`, unsigned.
    Gt,
    /// `field & mask >= value`, unsigned.
    Ge,
    /// `field & mask & value != 0`.
    Set,
}

/// One test: load a field, mask it, compare it with a constant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Test {
    /// The field loaded.
    pub field: Field,
    /// Anded with the loaded value before the comparison; all ones for none.
    pub mask: u32,
    /// The comparison.
    pub cmp: Cmp,
    /// The constant compared with.
    pub value: u32,
}

/// An index into [`Program::nodes`].
pub type NodeId = u32;

/// A node of a filter's decision graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Node {
    /// The packet does not match.
    Reject,
    /// The packet matches.
    Accept,
    /// Evaluate `test`; go to `then` if it holds and to `els` if not.
    Test {
        /// The test.
        test: Test,
        /// The next node when the test holds.
        then: NodeId,
        /// The next node when it does not.
        els: NodeId,
    },
}

/// One filter: a decision graph whose edges all point to higher indices
/// (so it is acyclic and `nodes` is a topological order).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Program {
    /// The nodes; `nodes[0]` is [`Node::Reject`] and `nodes[1]` is
    /// [`Node::Accept`].
    pub nodes: Vec<Node>,
    /// Where evaluation starts.
    pub root: NodeId,
    /// The computed values that tests on [`Base::Value`] read, each a
    /// postfix sequence of [`Op`]s.
    pub values: Vec<Vec<Op>>,
}

/// A node id that is always [`Node::Reject`].
pub const REJECT: NodeId = 0;
/// A node id that is always [`Node::Accept`].
pub const ACCEPT: NodeId = 1;

/// The wire length of a whole frame: its length (a frame longer than
/// 4 GiB, which no link carries, counts as `u32::MAX`, BPF's widest).
#[inline]
pub fn wire_len(pkt: &[u8]) -> u32 {
    u32::try_from(pkt.len()).unwrap_or(u32::MAX)
}

impl Field {
    /// Reads this field of `pkt`, or `None` when any byte it needs (the IHL
    /// byte included, for [`Base::Transport`]) lies past the end. A
    /// [`Base::Value`] is not a field of the packet: it reads through
    /// [`Program::load`], and `None` here.
    #[inline]
    pub fn load(&self, pkt: &[u8]) -> Option<u32> {
        let base = match self.base {
            Base::Link => 0usize,
            Base::Transport => 14 + 4 * usize::from(*pkt.get(14)? & 0x0f),
            Base::Value(_) => return None,
        };
        let at = base.checked_add(self.offset as usize)?;
        let bytes = pkt.get(at..at.checked_add(self.size as usize)?)?;
        Some(bytes.iter().fold(0u32, |v, &b| (v << 8) | u32::from(b)))
    }
}

impl Test {
    /// Whether the test holds for a loaded field value.
    #[inline]
    pub fn holds(&self, field_value: u32) -> bool {
        let v = field_value & self.mask;
        match self.cmp {
            Cmp::Eq => v == self.value,
            Cmp::Gt => v > self.value,
            Cmp::Ge => v >= self.value,
            Cmp::Set => v & self.value != 0,
        }
    }

    /// Evaluates the test on `pkt`: `None` when the load is out of bounds.
    #[inline]
    pub fn eval(&self, pkt: &[u8]) -> Option<bool> {
        self.field.load(pkt).map(|v| self.holds(v))
    }
}

impl Program {
    /// A program that matches every packet.
    pub fn accept_all() -> Self {
        Program {
            nodes: vec![Node::Reject, Node::Accept],
            root: ACCEPT,
            values: Vec::new(),
        }
    }

    /// A program that matches no packet.
    pub fn reject_all() -> Self {
        Program {
            nodes: vec![Node::Reject, Node::Accept],
            root: REJECT,
            values: Vec::new(),
        }
    }

    /// Reads `field` of `pkt`, a packet of `wire_len` bytes on the wire, as
    /// this program's tests do: a packet field, or one of
    /// [`Program::values`] computed; `None` when a load is out of bounds or
    /// a divisor zero.
    #[inline]
    pub fn load(&self, field: &Field, pkt: &[u8], wire_len: u32) -> Option<u32> {
        match field.base {
            Base::Value(i) => eval_value(self.values.get(i as usize)?, pkt, wire_len),
            _ => field.load(pkt),
        }
    }

    /// The reference semantics: whether `pkt`, a whole frame, matches.
    pub fn matches(&self, pkt: &[u8]) -> bool {
        self.matches_captured(pkt, wire_len(pkt))
    }

    /// Whether `pkt` matches as the first bytes of a packet of `wire_len`
    /// bytes on the wire: a capture's record cut to its snaplen, read as
    /// libpcap's `pcap_offline_filter` reads it. `len` (and `greater`,
    /// `less`) is `wire_len`; every load is bounded by `pkt`'s length,
    /// and one past it rejects the packet.
    pub fn matches_captured(&self, pkt: &[u8], wire_len: u32) -> bool {
        let mut at = self.root;
        loop {
            match self.nodes[at as usize] {
                Node::Reject => return false,
                Node::Accept => return true,
                Node::Test { test, then, els } => {
                    match self.load(&test.field, pkt, wire_len).map(|v| test.holds(v)) {
                        None => return false,
                        Some(true) => at = then,
                        Some(false) => at = els,
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(base: Base, offset: u32, size: Size, mask: u32, cmp: Cmp, value: u32) -> Test {
        Test {
            field: Field { base, offset, size },
            mask,
            cmp,
            value,
        }
    }

    #[test]
    fn loads_are_big_endian_and_bounded() {
        let pkt = [0u8, 1, 2, 3, 4, 5];
        let f = |offset, size| {
            Field {
                base: Base::Link,
                offset,
                size,
            }
            .load(&pkt)
        };
        assert_eq!(f(1, Size::H), Some(0x0102));
        assert_eq!(f(2, Size::W), Some(0x02030405));
        assert_eq!(f(3, Size::W), None);
        assert_eq!(f(u32::MAX, Size::B), None);
    }

    #[test]
    fn transport_base_follows_the_ihl_and_aborts_without_it() {
        let mut pkt = vec![0u8; 40];
        pkt[14] = 0x45;
        pkt[34] = 0xab;
        let f = Field {
            base: Base::Transport,
            offset: 0,
            size: Size::B,
        };
        assert_eq!(f.load(&pkt), Some(0xab));
        assert_eq!(f.load(&pkt[..14]), None);
        pkt[14] = 0x46;
        assert_eq!(f.load(&pkt), Some(0));
        assert_eq!(f.load(&pkt[..38]), None);
    }

    #[test]
    fn an_out_of_bounds_load_rejects_even_under_negation() {
        // not (ether[100] = 1): BPF rejects a short packet rather than
        // accepting it.
        let test = t(Base::Link, 100, Size::B, !0, Cmp::Eq, 1);
        let p = Program {
            nodes: vec![
                Node::Reject,
                Node::Accept,
                Node::Test {
                    test,
                    then: REJECT,
                    els: ACCEPT,
                },
            ],
            root: 2,
            values: Vec::new(),
        };
        assert!(!p.matches(&[0u8; 60]));
        assert!(p.matches(&[0u8; 101]));
    }

    #[test]
    fn comparisons() {
        let b = |cmp, mask, value, x| t(Base::Link, 0, Size::B, mask, cmp, value).holds(x);
        assert!(b(Cmp::Eq, 0xf0, 0x40, 0x45));
        assert!(b(Cmp::Gt, !0, 4, 5) && !b(Cmp::Gt, !0, 5, 5));
        assert!(b(Cmp::Ge, !0, 5, 5) && !b(Cmp::Ge, !0, 6, 5));
        assert!(b(Cmp::Set, !0, 0x12, 0x02) && !b(Cmp::Set, !0, 0x12, 0x21));
    }
}
