//! Native code for a merged table, through vcode (the paper's §4.2: DPF
//! compiles the merged filters into one function with the constants as
//! immediates and the dispatches as jump tables, hashes or compares).
//!
//! The generated function is `classify(pkt: *const u8, len: u64) -> u64`:
//! the owner of the best matching filter, or `u64::MAX`, so that the code
//! alone is the classifier (a code cache can publish it with nothing
//! beside it). It walks the trie of [`Merged`] as [`Merged::classify`]
//! does, with the best match so far in one register as `rank << 32 |
//! owner`: comparing it with `rank << 32 | 0xffff_ffff` compares ranks. Every load is bounds-checked against `len`, except where
//! a check on the same path already covered it (the generator tracks the
//! bytes proven present, a dominance argument: trie paths never merge). The
//! IPv4 header length is read once per path into a register holding the
//! transport header's address.
//!
//! Code is generic over the vcode backend, so the reference backend runs
//! exactly this client code as an oracle for the native backend.

use crate::ir::{
    ACCEPT, Base, Cmp, Field, Geneve, GeneveLayer, LoadBase, Node, NodeId, Op, Program, REJECT,
    Size, Test,
};
use crate::merge::{Dispatch, Key, MNodeId, Merged, Strategy};
use std::cmp::Reverse;
use std::collections::HashMap;
use vcode::ext::Bswap;
use vcode::{Backend, Class, Func, Label, Leaf, Local, P, Reg, UL};

/// The registers of a classifier: its parameters and four temporaries, all
/// caller-saved on x86-64 when no filter computes a value, so that the
/// function needs no frame; `w` and `wire` only for tables that compute
/// values and read `len` (which then take callee-saved registers, and a
/// frame saves them).
#[derive(Clone, Copy)]
struct Regs {
    pkt: Reg<P>,
    /// The bytes at `pkt`.
    len: Reg<UL>,
    /// The packet's length on the wire (`len` in a filter), which may
    /// exceed the bytes at `pkt` for a capture cut to its snaplen; `len`'s
    /// register where no filter reads it (never read then).
    wire: Reg<UL>,
    /// `pkt + len`.
    end: Reg<P>,
    /// The best match so far: `rank << 32 | owner`, or all ones.
    best: Reg<UL>,
    /// The loaded field (and scratch before the load).
    v: Reg<UL>,
    /// The transport header's address, once read on this path.
    tb: Reg<P>,
    /// Scratch for computed values (`len`, arithmetic), which keep the
    /// top of their stack in `v` and the rest in stack slots; `v`'s
    /// register where no filter computes a value (never used then).
    w: Reg<UL>,
}

/// What is known at a point of the code, from the tests that dominate it.
#[derive(Clone, Copy, Default)]
struct Known {
    /// Bytes of the frame known to be present.
    link: u32,
    /// `tb` holds the transport header's address.
    tb: bool,
    /// Bytes from `tb` known to be present.
    transport: u32,
    /// A filter may already have matched (so pruning checks pay off).
    found: bool,
}

/// The byte order a field is loaded in. x86 loads little-endian; a test
/// for equality (or for set bits) needs no byte swap when its constant and
/// mask are swapped instead, at generation time. Order comparisons, jump
/// tables, hashes and binary searches take the value itself.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Order {
    /// The field's value (loaded, then byte-swapped).
    Value,
    /// The field's bytes as loaded; compare with [`wire`] constants.
    Wire,
}

/// `x` as a field of `size` reads when loaded without a swap.
fn wire(size: Size, x: u32) -> u64 {
    match size {
        Size::B => u64::from(x & 0xff),
        Size::H => u64::from((x as u16).swap_bytes()),
        Size::W => u64::from(x.swap_bytes()),
    }
}

/// Generates the classifier for `m` into `f` and returns what `end`
/// returns.
pub fn generate<B: Backend>(f: &mut Func<B>, m: &Merged) -> vcode::Result<B::Code> {
    emit(f, m)?;
    f.end()
}

/// Emits the classifier for `m` into `f`, short of `end`: the caller ends
/// it with `end` or `end_in` (into a code cache's memory). Its signature
/// is `classify(pkt, len, wire_len) -> u64`: `len` bytes at `pkt`, of a
/// packet `wire_len` bytes long on the wire.
pub fn emit<B: Backend>(f: &mut Func<B>, m: &Merged) -> vcode::Result<()> {
    let p = f.lambda("%p%ul%ul", Leaf::Yes)?;
    let (pkt, len, wire) = (p.get::<P>(0)?, p.get::<UL>(1)?, p.get::<UL>(2)?);
    let values = || {
        m.entries
            .iter()
            .filter_map(|e| e.residual.as_ref())
            .flat_map(|p| &p.values)
    };
    let computes = values().next().is_some();
    let reads_wire = values().flatten().any(|op| *op == Op::Len);
    // A parameter no code reads is a register more for the temporaries.
    let wire = if reads_wire {
        wire
    } else {
        f.putreg(wire);
        len
    };
    let end = f.getreg(Class::Temp)?;
    let best = f.getreg(Class::Temp)?;
    let v = f.getreg(Class::Temp)?;
    let r = Regs {
        pkt,
        len,
        wire,
        end,
        best,
        v,
        tb: f.getreg(Class::Temp)?,
        w: if computes { f.getreg(Class::Temp)? } else { v },
    };
    f.set(r.best, u64::MAX);
    if let Some(root) = m.root {
        f.add(r.end, r.pkt, r.len.cast::<P>());
        let done = f.genlabel();
        Gen {
            f,
            m,
            r,
            slots: Vec::new(),
        }
        .node(root, done, Known::default());
        f.label(done);
    }
    f.ret(r.best);
    Ok(())
}

/// The owner in a classifier's result, `None` for no match.
#[inline]
pub fn owner(result: u64) -> Option<u32> {
    (result != u64::MAX).then_some(result as u32)
}

/// The largest `best` value of a match of rank `rank`: `best` at or below
/// it means a match at least as good as `rank` was found.
fn rank_bound(rank: u32) -> u64 {
    u64::from(rank) << 32 | u64::from(u32::MAX)
}

impl Merged {
    /// The `best` register's value for a match of the filter of rank `rank`.
    fn best(&self, rank: u32) -> u64 {
        u64::from(rank) << 32 | u64::from(self.entries[rank as usize].owner)
    }
}

/// The most single-constant dispatches between a value table's arm and
/// its filter.
const MAX_TAIL: usize = 4;

/// See [`Gen::straight`].
struct Straight<'a> {
    tail: Vec<(Key, u32)>,
    rank: u32,
    residual: Option<&'a Program>,
}

/// A dispatch emitted as a value table (see [`Gen::value_table`]).
struct ValueTable<'a> {
    /// The key of the first slot.
    min: u32,
    /// One `best` word per key from `min` on.
    words: Vec<u64>,
    /// The tests between every arm of the table and its filter, tested
    /// once: `field & mask == value`.
    tail: Vec<(Key, u32)>,
    /// The residual every filter of the table shares, tested once.
    residual: Option<&'a Program>,
    /// The arms outside the table (their key, their subtree), compared
    /// first.
    exceptions: Vec<(u32, MNodeId)>,
    /// The register that holds the table's address, then the slot's word.
    reg: Reg<P>,
}

/// Whether every test of `p` reads a field relative to the frame (so
/// testing it never needs `tb`).
fn link_only(p: &Program) -> bool {
    p.nodes.iter().all(|n| match n {
        Node::Test { test, .. } => test.field.base == Base::Link,
        _ => true,
    })
}

struct Gen<'a, B: Backend> {
    f: &'a mut Func<B>,
    m: &'a Merged,
    r: Regs,
    /// Stack slots of computed values' evaluation stacks, shared by all.
    slots: Vec<Local<UL>>,
}

impl<'a, B: Backend> Gen<'a, B> {
    /// The code of trie node `id`, continuing at `cont`.
    ///
    /// Leaves ranked below every filter of the node's dispatch and wild
    /// chain (a catch-all such as `multicast`, with no atom to merge on,
    /// sits at the root with the lowest precedence) are tested last, at
    /// the end of the chain: by then a better match has usually been
    /// found, and one comparison of ranks skips them. Tested first, they
    /// would run for every frame and leave "a match may exist" behind,
    /// which rules out the value tables below.
    fn node(&mut self, id: MNodeId, cont: Label, k: Known) {
        let n = &self.m.nodes[id as usize];
        let rest = n.dispatch.as_ref().map(|d| {
            let arms = d.arms.iter().map(|a| self.m.nodes[a.1 as usize].min_rank);
            let wild = n.wild.map(|w| self.m.nodes[w as usize].min_rank);
            arms.chain(wild).min().unwrap_or(u32::MAX)
        });
        let later = match rest {
            Some(rest) => n.leaves.partition_point(|&r| r < rest),
            None => n.leaves.len(),
        };
        if later == n.leaves.len() {
            return self.chain(id, cont, k, later);
        }
        let tail = self.f.genlabel();
        if k.found {
            self.f.ble(self.r.best, rank_bound(n.min_rank), cont);
        }
        self.chain(id, tail, k, later);
        self.f.label(tail);
        // Every path of the chain ends here, with at least what held at its
        // start (`tb` is only ever clobbered below a point where it was not
        // yet loaded).
        let mut kt = k;
        kt.found = true;
        let ranks = n.leaves[later..].to_vec();
        let after = self.f.genlabel();
        self.leaves(&ranks, kt, after);
        self.f.label(after);
        self.f.jmp(cont);
    }

    /// Tests the leaves `ranks` (ascending) in turn, jumping to `after` at
    /// the first match; falls through when none matches.
    fn leaves(&mut self, ranks: &[u32], mut k: Known, after: Label) {
        for &rank in ranks {
            if k.found {
                self.f.ble(self.r.best, rank_bound(rank), after);
            }
            let residual = &self.m.entries[rank as usize].residual;
            match residual {
                None => {
                    self.f.set(self.r.best, self.m.best(rank));
                    self.f.jmp(after);
                    return;
                }
                Some(p) => {
                    let (yes, no) = (self.f.genlabel(), self.f.genlabel());
                    self.residual(p, k, yes, no);
                    self.f.label(yes);
                    self.f.set(self.r.best, self.m.best(rank));
                    self.f.jmp(after);
                    self.f.label(no);
                }
            }
            k.found = true;
        }
    }

    /// [`Gen::node`] without the deferred leaves: the node's first `leaves`
    /// leaves, its dispatch, then its wild chain (a loop: one node per
    /// distinct key), each arm recursing (one level per atom, at most
    /// `merge::MAX_ATOMS`).
    fn chain(&mut self, id: MNodeId, cont: Label, mut k: Known, leaves: usize) {
        let mut id = id;
        let mut leaves = leaves;
        loop {
            let n = &self.m.nodes[id as usize];
            if k.found {
                self.f.ble(self.r.best, rank_bound(n.min_rank), cont);
            }
            if leaves > 0 {
                let after = self.f.genlabel();
                let ranks = n.leaves[..leaves].to_vec();
                self.leaves(&ranks, k, after);
                self.f.label(after);
                k.found = true;
            }
            let Some(d) = &n.dispatch else {
                self.f.jmp(cont);
                return;
            };
            let arms_end = if n.wild.is_some() {
                self.f.genlabel()
            } else {
                cont
            };
            // Every filter under the arms needs this many frame bytes: check
            // them all with the first load's check.
            let arms_need = d
                .arms
                .iter()
                .map(|a| self.m.nodes[a.1 as usize].link_need)
                .min()
                .unwrap_or(0);
            let mut inside = k;
            let table = self.value_table(d, k);
            let order = match (&d.strategy, d.arms.len()) {
                _ if table.is_some() => Order::Value,
                (_, 1) | (Strategy::Linear, _) => Order::Wire,
                _ => Order::Value,
            };
            self.load(
                d.key.field,
                d.key.mask,
                &mut inside,
                arms_end,
                arms_need,
                order,
            );
            let size = d.key.field.size;
            if let Some(t) = table {
                self.emit_value_table(d, &t, inside, arms_end);
                if n.wild.is_none() {
                    self.f.jmp(cont);
                }
            } else if let [(key, child)] = d.arms[..] {
                // One constant (the common case of a test shared by the whole
                // subtree): fall through into the child on a match.
                self.f.bne(self.r.v, wire(size, key), arms_end);
                self.node(child, arms_end, inside);
            } else {
                let labels: Vec<Label> = d.arms.iter().map(|_| self.f.genlabel()).collect();
                self.dispatch(d, &labels, arms_end);
                for (&(_, child), &l) in d.arms.iter().zip(&labels) {
                    self.f.label(l);
                    self.node(child, arms_end, inside);
                }
            }
            let Some(w) = n.wild else { return };
            self.f.label(arms_end);
            k.found = true;
            id = w;
            leaves = self.m.nodes[w as usize].leaves.len();
        }
    }

    /// Where an arm's subtree leads when it is one filter behind at most
    /// [`MAX_TAIL`] more single-constant dispatches: those `(key, value)`
    /// tests, the filter's rank and its residual. `None` for any other
    /// shape (more than one arm, a wild child, leaves on the way, several
    /// filters where the first has a residual).
    fn straight(&self, id: MNodeId) -> Option<Straight<'a>> {
        let m: &'a Merged = self.m;
        let mut id = id;
        let mut tail = Vec::new();
        loop {
            let c = &m.nodes[id as usize];
            if c.wild.is_some() {
                return None;
            }
            match &c.dispatch {
                None => {
                    let &rank = c.leaves.first()?;
                    let residual = m.entries[rank as usize].residual.as_ref();
                    if residual.is_some() && c.leaves.len() != 1 {
                        return None;
                    }
                    return Some(Straight {
                        tail,
                        rank,
                        residual,
                    });
                }
                Some(d) if c.leaves.is_empty() && d.arms.len() == 1 && tail.len() < MAX_TAIL => {
                    tail.push((d.key, d.arms[0].0));
                    id = d.arms[0].1;
                }
                _ => return None,
            }
        }
    }

    /// A value table for `d`, if it can be one, reached with `k` known.
    ///
    /// The table covers the arms that lead [`Gen::straight`] to one filter
    /// each with the same tail of tests and the same residual (none, or
    /// one that reads only frame-relative fields, such as the TPID test of
    /// `vlan V`); at most four other arms (`10.0.0.1`'s ports beside a
    /// thousand hosts behind `port 80`) are compared first, as exceptions.
    /// The table's keys are dense (a jump table's) or, more than four of
    /// them, span at most eight slots per key: a slot is eight bytes of
    /// data, where a jump table, hash or binary search has code for every
    /// arm, and a frame touches one slot. A register must be free for the
    /// table: `best` when nothing has matched yet and no residual is
    /// shared, else `tb` when the transport header's address is not yet
    /// needed on this path.
    fn value_table(&self, d: &Dispatch, k: Known) -> Option<ValueTable<'a>> {
        let shapes: Vec<Option<Straight<'a>>> = d.arms.iter().map(|a| self.straight(a.1)).collect();
        // The commonest shape is the table's (of equally common ones, the
        // first arm's, so that the code does not depend on hashing).
        type Shape<'s, 'p> = (&'s [(Key, u32)], Option<&'p Program>);
        let mut count: HashMap<Shape<'_, 'a>, (usize, Reverse<usize>)> = HashMap::new();
        for (i, s) in shapes.iter().enumerate() {
            if let Some(s) = s {
                count
                    .entry((&s.tail[..], s.residual))
                    .or_insert((0, Reverse(i)))
                    .0 += 1;
            }
        }
        let (&(tail, residual), &(n, _)) = count.iter().max_by_key(|e| *e.1)?;
        if n < 5 || d.arms.len() - n > 4 || residual.is_some_and(|p| !link_only(p)) {
            return None;
        }
        let fits = |s: &Option<Straight<'a>>| {
            s.as_ref()
                .is_some_and(|s| s.tail == tail && s.residual == residual)
        };
        let mut keys = d.arms.iter().zip(&shapes).filter(|(_, s)| fits(s));
        let min = keys.next()?.0.0;
        let max = keys.next_back().map_or(min, |a| a.0.0);
        let len = u64::from(max - min) + 1;
        let dense = len <= 2 * n as u64 + 8;
        if len > 1 << 16 || (!dense && len > 8 * n as u64 + 64) {
            return None;
        }
        let mut words = vec![u64::MAX; len as usize];
        let mut exceptions = Vec::new();
        for (&(key, child), s) in d.arms.iter().zip(&shapes) {
            match s {
                Some(st) if fits(s) => words[(key - min) as usize] = self.m.best(st.rank),
                _ => exceptions.push((key, child)),
            }
        }
        let reg = if !k.found && residual.is_none() {
            self.r.best.cast::<P>()
        } else if !k.tb {
            self.r.tb
        } else {
            return None;
        };
        Some(ValueTable {
            min,
            words,
            tail: tail.to_vec(),
            residual,
            exceptions,
            reg,
        })
    }

    /// The code of a value table, the dispatch's key loaded into `v` (as
    /// its value), with `inside` known: the exceptions' compares, the
    /// shared tail's tests, the key loaded again (in bounds: loaded
    /// before), then the slot's word, `rank << 32 | owner` or all ones in
    /// a gap, replaces `best` when it ranks better (and the shared
    /// residual, if any, accepts), with no branch on the key. Continues at
    /// `done`.
    fn emit_value_table(&mut self, d: &Dispatch, t: &ValueTable<'_>, inside: Known, done: Label) {
        let (v, best, w) = (self.r.v, self.r.best, t.reg);
        let labels: Vec<Label> = t.exceptions.iter().map(|_| self.f.genlabel()).collect();
        for (&(key, _), &l) in t.exceptions.iter().zip(&labels) {
            self.f.beq(v, u64::from(key), l);
        }
        let mut k = inside;
        if !t.tail.is_empty() {
            for &(key, value) in &t.tail {
                self.load(key.field, key.mask, &mut k, done, 0, Order::Wire);
                self.f.bne(v, wire(key.field.size, value), done);
            }
            self.load_value(d.key.field, d.key.mask, Order::Value);
        }
        let bytes: Vec<u8> = t.words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let table = self.f.data(&bytes);
        self.f.sub(v, v, u64::from(t.min));
        self.f.bge(v, t.words.len() as u64, done);
        self.f.lsh(v, v, 3);
        self.f.addr_data(w, table);
        let wu = w.cast::<UL>();
        self.f.ld(wu, w, v.cast::<P>());
        if let Some(p) = t.residual {
            self.f.beq(wu, u64::MAX, done);
            let yes = self.f.genlabel();
            let mut kr = k;
            kr.tb = false;
            self.residual(p, kr, yes, done);
            self.f.label(yes);
        }
        if wu != best {
            // Ranks compare as the words do (`rank << 32 | owner`; a gap's
            // all ones never wins).
            self.f.bge(wu, best, done);
            self.f.mov(best, wu);
        }
        if !t.exceptions.is_empty() {
            self.f.jmp(done);
            for (&(_, child), &l) in t.exceptions.iter().zip(&labels) {
                self.f.label(l);
                self.node(child, done, inside);
            }
        }
    }

    /// Jumps to `labels[i]` when `v` holds `arms[i].0`, else to `miss`.
    fn dispatch(&mut self, d: &Dispatch, labels: &[Label], miss: Label) {
        let v = self.r.v;
        match d.strategy {
            Strategy::Linear => {
                for (&(key, _), &l) in d.arms.iter().zip(labels) {
                    self.f.beq(v, wire(d.key.field.size, key), l);
                }
                self.f.jmp(miss);
            }
            Strategy::Binary => self.binary(&d.arms, labels, miss),
            Strategy::Table { min, len } => {
                self.f.sub(v, v, u64::from(min));
                self.f.bge(v, u64::from(len), miss);
                let mut slots = vec![miss; len as usize];
                for (&(key, _), &l) in d.arms.iter().zip(labels) {
                    slots[(key - min) as usize] = l;
                }
                self.f.jump_table(v, &slots);
            }
            Strategy::Hash { mul, bits, .. } => {
                // The low 32 bits of v * mul, shifted: v and mul are below
                // 2^32, so the 64-bit product does not wrap.
                self.f.mul(v, v, u64::from(mul));
                self.f.rsh(v, v, u64::from(32 - bits));
                self.f.and(v, v, (1u64 << bits) - 1);
                let mut buckets: Vec<Vec<usize>> = vec![Vec::new(); 1 << bits];
                for (i, &(key, _)) in d.arms.iter().enumerate() {
                    buckets[Strategy::hash(mul, bits, key) as usize].push(i);
                }
                let slots: Vec<Label> = buckets
                    .iter()
                    .map(|b| {
                        if b.is_empty() {
                            miss
                        } else {
                            self.f.genlabel()
                        }
                    })
                    .collect();
                self.f.jump_table(v, &slots);
                for (b, &l) in buckets.iter().zip(&slots) {
                    if b.is_empty() {
                        continue;
                    }
                    self.f.label(l);
                    // The hash overwrote the field: load it again (in
                    // bounds: checked before the hash), as loaded.
                    self.load_value(d.key.field, d.key.mask, Order::Wire);
                    for &i in b {
                        self.f
                            .beq(v, wire(d.key.field.size, d.arms[i].0), labels[i]);
                    }
                    self.f.jmp(miss);
                }
            }
        }
    }

    fn binary(&mut self, arms: &[(u32, MNodeId)], labels: &[Label], miss: Label) {
        if arms.len() <= 3 {
            for (&(key, _), &l) in arms.iter().zip(labels) {
                self.f.beq(self.r.v, u64::from(key), l);
            }
            self.f.jmp(miss);
            return;
        }
        let mid = arms.len() / 2;
        let key = u64::from(arms[mid].0);
        let left = self.f.genlabel();
        self.f.beq(self.r.v, key, labels[mid]);
        self.f.blt(self.r.v, key, left);
        self.binary(&arms[mid + 1..], &labels[mid + 1..], miss);
        self.f.label(left);
        self.binary(&arms[..mid], &labels[..mid], miss);
    }

    /// Loads `field & mask` into `v` in `order`, jumping to `oob` when any
    /// byte it needs is past the end, or when the frame is shorter than
    /// `need` bytes (which the caller knows every match requires); records
    /// in `k` what the checks prove.
    fn load(
        &mut self,
        field: Field,
        mask: u32,
        k: &mut Known,
        oob: Label,
        need: u32,
        order: Order,
    ) {
        let Regs {
            pkt,
            len,
            end,
            v,
            tb,
            ..
        } = self.r;
        let end_of_field = field.offset.saturating_add(field.size as u32);
        match field.base {
            Base::Link => {
                let bound = end_of_field.max(need);
                if end_of_field > k.link {
                    self.f.blt(len, u64::from(bound), oob);
                    k.link = bound;
                }
            }
            // Computed values are never dispatched on; residuals test them
            // through `value_test`.
            Base::Value(_) => {
                self.f.jmp(oob);
                return;
            }
            Base::Transport => {
                if !k.tb {
                    let bound = need.max(15);
                    if k.link < 15 {
                        self.f.blt(len, u64::from(bound), oob);
                        k.link = bound;
                    }
                    let tbu = tb.cast::<UL>();
                    self.f.lduc(tbu, pkt, 14);
                    self.f.and(tbu, tbu, 0x0f);
                    self.f.lsh(tbu, tbu, 2);
                    self.f.add(tb, tb, pkt);
                    self.f.add(tb, tb, 14);
                    k.tb = true;
                    k.transport = 0;
                }
                if end_of_field > k.transport {
                    let vp = v.cast::<P>();
                    self.f.add(vp, tb, end_of_field as usize);
                    self.f.bgt(vp, end, oob);
                    k.transport = end_of_field;
                }
            }
        }
        self.load_value(field, mask, order);
    }

    /// Loads `field & mask` into `v` in `order`, with no bounds check.
    fn load_value(&mut self, field: Field, mask: u32, order: Order) {
        let (v, base) = match field.base {
            Base::Value(_) => return,
            Base::Link => (self.r.v, self.r.pkt),
            Base::Transport => (self.r.v, self.r.tb),
        };
        let off = field.offset as usize;
        match (field.size, order) {
            (Size::B, _) => self.f.lduc(v, base, off),
            (Size::H, Order::Wire) => self.f.ldus(v, base, off),
            (Size::H, Order::Value) => {
                self.f.ldus(v, base, off);
                self.f.bswap16(v, v);
            }
            (Size::W, Order::Wire) => self.f.ldu(v, base, off),
            (Size::W, Order::Value) => {
                self.f.ldu(v, base, off);
                self.f.bswap32(v, v);
            }
        }
        let all = match field.size {
            Size::B => 0xff,
            Size::H => 0xffff,
            Size::W => u32::MAX,
        };
        if mask & all != all {
            let m = match order {
                Order::Wire => wire(field.size, mask),
                Order::Value => u64::from(mask & all),
            };
            self.f.and(v, v, m);
        }
    }

    /// A residual program: jumps to `yes` if it accepts and to `no` if it
    /// rejects or a load is out of bounds.
    fn residual(&mut self, p: &Program, k: Known, yes: Label, no: Label) {
        let labels: Vec<Label> = (0..p.nodes.len())
            .map(|i| match i as NodeId {
                REJECT => no,
                ACCEPT => yes,
                _ => self.f.genlabel(),
            })
            .collect();
        if p.root != 2 {
            self.f.jmp(labels[p.root as usize]);
        }
        for (i, node) in p.nodes.iter().enumerate().skip(2) {
            let Node::Test { test, then, els } = *node else {
                continue;
            };
            self.f.label(labels[i]);
            let mut here = k;
            if let Base::Value(v) = test.field.base {
                match p.values.get(v as usize) {
                    Some(ops) => self.value_test(ops, &test, labels[then as usize], no),
                    None => self.f.jmp(no),
                }
            } else {
                self.test(&test, &mut here, labels[then as usize], no);
            }
            if els as usize != i + 1 {
                self.f.jmp(labels[els as usize]);
            }
        }
    }

    /// `w` = the base of a Geneve load ([`Geneve::base`]), with `v` as
    /// scratch; to `fail` where a byte it reads is missing.
    fn geneve_base(&mut self, g: &Geneve, fail: Label) {
        let Regs { pkt, len, v, w, .. } = self.r;
        let net = u64::from(g.net);
        // The outer IPv4 or IPv6 header.
        let at = u64::from(g.v4_at);
        self.f.blt(len, at + g.v4_size as u64, fail);
        match g.v4_size {
            Size::B => self.f.lduc(v, pkt, at as usize),
            Size::H => {
                self.f.ldus(v, pkt, at as usize);
                self.f.bswap16(v, v);
            }
            Size::W => {
                self.f.ldu(v, pkt, at as usize);
                self.f.bswap32(v, v);
            }
        }
        self.f.and(v, v, u64::from(g.v4_mask));
        let (v6, have_g) = (self.f.genlabel(), self.f.genlabel());
        self.f.bne(v, u64::from(g.v4_value), v6);
        self.f.blt(len, net + 1, fail);
        self.f.lduc(w, pkt, net as usize);
        self.f.and(w, w, 0x0f);
        self.f.lsh(w, w, 2);
        self.f.add(w, w, net + 8);
        self.f.jmp(have_g);
        self.f.label(v6);
        self.f.set(w, net + 48);
        self.f.label(have_g);
        // `w` = g. The end of the options: g + 8 + 4 * (frame[g] & 0x3f).
        let options_end = |s: &mut Self| {
            s.f.add(v, w, 1);
            s.f.bgt(v, len, fail);
            s.f.lduc(v, pkt, w.cast::<P>());
            s.f.and(v, v, 0x3f);
            s.f.lsh(v, v, 2);
            s.f.add(v, v, 8);
            s.f.add(w, w, v);
        };
        match g.layer {
            GeneveLayer::Header => return,
            GeneveLayer::Link => options_end(self),
            GeneveLayer::Type | GeneveLayer::Payload | GeneveLayer::Transport => {
                // The protocol type: Ethernet (0x6558) or not.
                self.f.add(v, w, 4);
                self.f.bgt(v, len, fail);
                self.f.add(v, w, 2);
                self.f.ldus(v, pkt, v.cast::<P>());
                self.f.bswap16(v, v);
                let (bare, done) = (self.f.genlabel(), self.f.genlabel());
                self.f.bne(v, 0x6558, bare);
                options_end(self);
                let past = if g.layer == GeneveLayer::Type { 12 } else { 14 };
                self.f.add(w, w, past);
                self.f.jmp(done);
                self.f.label(bare);
                if g.layer == GeneveLayer::Type {
                    self.f.add(w, w, 2);
                } else {
                    options_end(self);
                }
                self.f.label(done);
            }
        }
        if g.layer == GeneveLayer::Transport {
            // Behind the inner IPv4 header, whose IHL is `add` bytes in.
            let add = u64::from(g.add);
            self.f.add(v, w, add + 1);
            self.f.bgt(v, len, fail);
            self.f.add(v, w, add);
            self.f.lduc(v, pkt, v.cast::<P>());
            self.f.and(v, v, 0x0f);
            self.f.lsh(v, v, 2);
            self.f.add(w, w, v);
        }
    }

    /// A test of a computed value ([`Program::values`]): computes it into
    /// `v`, masks it, and branches to `then` if `t` holds; falls through if not;
    /// jumps to `fail` if a load is out of bounds or a divisor zero, as
    /// [`crate::ir::eval_value`] defines. Values are kept to 32 bits.
    fn value_test(&mut self, ops: &[Op], t: &Test, then: Label, fail: Label) {
        let Regs {
            pkt,
            len,
            wire,
            v,
            w,
            ..
        } = self.r;
        let mut depth = 0usize;
        for &op in ops {
            match op {
                Op::Const(_) | Op::Len => {
                    if depth > 0 {
                        let slot = self.slot(depth - 1);
                        self.f.st_local(v, slot);
                    }
                    match op {
                        Op::Const(k) => self.f.set(v, u64::from(k)),
                        _ => self.f.mov(v, wire),
                    }
                    depth += 1;
                }
                Op::Load(base, size) => {
                    // `w` = the address, computed without wrapping past 32
                    // bits except where libpcap's `add x` wraps.
                    match base {
                        LoadBase::At(k) => self.f.add(w, v, u64::from(k)),
                        LoadBase::Transport(d) => {
                            let ihl = 14 + d as usize;
                            self.f.blt(len, ihl as u64 + 1, fail);
                            self.f.lduc(w, pkt, ihl);
                            self.f.and(w, w, 0x0f);
                            self.f.lsh(w, w, 2);
                            self.f.add(w, w, v);
                            self.f.and(w, w, u64::from(u32::MAX));
                            self.f.add(w, w, ihl as u64);
                        }
                        LoadBase::Geneve(g) => {
                            // The index waits in its slot while `v` is
                            // scratch for the base.
                            let slot = self.slot(depth.saturating_sub(1));
                            self.f.st_local(v, slot);
                            self.geneve_base(&g, fail);
                            self.f.ld_local(v, slot);
                            self.f.add(w, w, v);
                            self.f.and(w, w, u64::from(u32::MAX));
                            self.f.add(w, w, u64::from(g.add));
                        }
                    }
                    self.f.add(v, w, size as u64);
                    self.f.bgt(v, len, fail);
                    let at = w.cast::<P>();
                    match size {
                        Size::B => self.f.lduc(v, pkt, at),
                        Size::H => {
                            self.f.ldus(v, pkt, at);
                            self.f.bswap16(v, v);
                        }
                        Size::W => {
                            self.f.ldu(v, pkt, at);
                            self.f.bswap32(v, v);
                        }
                    }
                }
                Op::Neg => {
                    self.f.neg(v, v);
                    self.f.and(v, v, u64::from(u32::MAX));
                }
                bin => {
                    let Some(d) = depth.checked_sub(2) else {
                        self.f.jmp(fail);
                        return;
                    };
                    let slot = self.slot(d);
                    self.f.ld_local(w, slot);
                    match bin {
                        Op::Add => self.f.add(v, w, v),
                        Op::Sub => self.f.sub(v, w, v),
                        Op::Mul => self.f.mul(v, w, v),
                        Op::Div => {
                            self.f.beq(v, 0, fail);
                            self.f.div(v, w, v);
                        }
                        Op::Mod => {
                            self.f.beq(v, 0, fail);
                            self.f.rem(v, w, v);
                        }
                        Op::And => self.f.and(v, w, v),
                        Op::Or => self.f.or(v, w, v),
                        Op::Xor => self.f.xor(v, w, v),
                        Op::Shl | Op::Shr => {
                            // A count of 32 or more shifts everything out.
                            let (zero, done) = (self.f.genlabel(), self.f.genlabel());
                            self.f.bge(v, 32, zero);
                            if op == Op::Shl {
                                self.f.lsh(v, w, v);
                            } else {
                                self.f.rsh(v, w, v);
                            }
                            self.f.jmp(done);
                            self.f.label(zero);
                            self.f.set(v, 0);
                            self.f.label(done);
                        }
                        _ => {
                            let (yes, done) = (self.f.genlabel(), self.f.genlabel());
                            if op == Op::Gt {
                                self.f.bgt(w, v, yes);
                            } else {
                                self.f.bge(w, v, yes);
                            }
                            self.f.set(v, 0);
                            self.f.jmp(done);
                            self.f.label(yes);
                            self.f.set(v, 1);
                            self.f.label(done);
                        }
                    }
                    if matches!(bin, Op::Add | Op::Sub | Op::Mul | Op::Shl) {
                        self.f.and(v, v, u64::from(u32::MAX));
                    }
                    depth -= 1;
                }
            }
        }
        if depth != 1 {
            self.f.jmp(fail);
            return;
        }
        if t.mask != u32::MAX {
            self.f.and(v, v, u64::from(t.mask));
        }
        let k = u64::from(t.value);
        match t.cmp {
            Cmp::Eq => self.f.beq(v, k, then),
            Cmp::Gt => self.f.bgt(v, k, then),
            Cmp::Ge => self.f.bge(v, k, then),
            Cmp::Set => {
                self.f.and(v, v, k);
                self.f.bne(v, 0, then);
            }
        }
    }

    /// Stack slot `i` of computed values, allocated on first use.
    fn slot(&mut self, i: usize) -> Local<UL> {
        while self.slots.len() <= i {
            let l = self.f.local::<UL>();
            self.slots.push(l);
        }
        self.slots[i]
    }

    /// Branches to `then` if `t` holds; falls through if not; jumps to
    /// `oob` if its load is out of bounds.
    fn test(&mut self, t: &Test, k: &mut Known, then: Label, oob: Label) {
        let order = match t.cmp {
            Cmp::Eq | Cmp::Set => Order::Wire,
            Cmp::Gt | Cmp::Ge => Order::Value,
        };
        self.load(t.field, t.mask, k, oob, 0, order);
        let v = self.r.v;
        let size = t.field.size;
        match t.cmp {
            // A constant with bits outside the field never equals it.
            Cmp::Eq if u64::from(t.value) > wire(size, u32::MAX) => {}
            Cmp::Eq => self.f.beq(v, wire(size, t.value), then),
            Cmp::Gt => self.f.bgt(v, u64::from(t.value), then),
            Cmp::Ge => self.f.bge(v, u64::from(t.value), then),
            Cmp::Set => {
                self.f.and(v, v, wire(size, t.value));
                self.f.bne(v, 0, then);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Test;
    use crate::merge::{Candidate, analyze, merge};
    use vcode::{Invoke, Reference, Value};

    fn eq(base: Base, offset: u32, size: Size, value: u32) -> Test {
        Test {
            field: Field { base, offset, size },
            mask: u32::MAX,
            cmp: Cmp::Eq,
            value,
        }
    }

    /// A conjunction of tests as a program.
    fn all_of(tests: &[Test]) -> Program {
        let mut nodes = vec![Node::Reject, Node::Accept];
        let n = tests.len() as u32;
        for (i, &test) in tests.iter().enumerate() {
            let then = if i as u32 + 1 == n {
                ACCEPT
            } else {
                i as u32 + 3
            };
            nodes.push(Node::Test {
                test,
                then,
                els: REJECT,
            });
        }
        Program {
            nodes,
            root: if n == 0 { ACCEPT } else { 2 },
            values: Vec::new(),
        }
    }

    fn packet(port: u16) -> Vec<u8> {
        let mut p = vec![0u8; 54];
        p[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        p[14] = 0x45;
        p[23] = 6;
        p[36..38].copy_from_slice(&port.to_be_bytes());
        p
    }

    /// The reference backend's classifier on `pkt`, `wire_len` bytes long
    /// on the wire.
    fn run_ref(code: &vcode::reference::RefCode, pkt: &[u8], wire_len: u32) -> u64 {
        let args = [
            Value::P(pkt.as_ptr() as usize),
            Value::UL(pkt.len() as u64),
            Value::UL(u64::from(wire_len)),
        ];
        // SAFETY: the classifier reads `len` bytes from `pkt` at most.
        match unsafe { code.invoke(&args) }.unwrap() {
            Value::UL(v) => v,
            v => panic!("{v:?}"),
        }
    }

    /// `filters` compiled, and merged with owners 0, 1, ... in order.
    /// `frame` cut at every length, each with four lengths on the wire:
    /// the native code, the reference backend's and the filters one by one
    /// (the first that matches) agree with the merged structure.
    fn agree_at_every_cut(
        m: &Merged,
        programs: &[Program],
        f: extern "C" fn(*const u8, u64, u64) -> u64,
        reference: &vcode::reference::RefCode,
        frame: &[u8],
    ) {
        for cut in 0..=frame.len() {
            let pkt = &frame[..cut];
            for wire in [cut, frame.len(), 1514, 0].map(|w| w as u32) {
                let want = m.classify_captured(pkt, wire);
                let native = owner(f(pkt.as_ptr(), pkt.len() as u64, u64::from(wire)));
                assert_eq!(native, want, "{cut} of {wire}");
                assert_eq!(
                    owner(run_ref(reference, pkt, wire)),
                    want,
                    "{cut} of {wire}"
                );
                let alone = programs.iter().position(|p| p.matches_captured(pkt, wire));
                assert_eq!(want, alone.map(|i| i as u32), "{cut} of {wire}");
            }
            assert_eq!(m.classify(pkt), m.classify_captured(pkt, cut as u32));
        }
    }

    fn compiled_and_merged(filters: &[&str]) -> (Vec<Program>, Merged) {
        let programs: Vec<Program> = filters.iter().map(|f| crate::compile(f).unwrap()).collect();
        let analyses: Vec<_> = programs.iter().map(analyze).collect();
        let cands: Vec<_> = analyses
            .iter()
            .enumerate()
            .map(|(i, a)| Candidate {
                owner: i as u32,
                analysis: a,
            })
            .collect();
        let m = merge(&cands);
        (programs, m)
    }

    /// The classifier of a table whose filters compute no value keeps to
    /// caller-saved registers on x86-64 (`wire_len`'s handed back), so
    /// it has no prologue; one that computes values saves what it takes.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn a_classifier_without_values_has_no_frame() {
        let native = |filters: &[&str]| {
            let (_, m) = compiled_and_merged(filters);
            generate(&mut Func::new(), &m).unwrap()
        };
        let atoms = native(&[
            "tcp dst port 80 and dst host 10.0.0.1",
            "udp port 53",
            "arp",
        ]);
        assert_eq!(atoms.parts().0, 0, "a prologue where none is needed");
        let values = native(&["tcp dst port 80", "greater 100"]);
        assert!(values.parts().0 > 0, "values take callee-saved registers");
    }

    #[test]
    fn every_strategy_agrees_with_the_reference_evaluator() {
        let mut seen = crate::merge::MergeStats::default();
        for ports in [
            vec![80u32],
            vec![22, 80, 443],
            (1000..1010).collect(),
            vec![7, 70, 700, 7000, 9, 90, 900, 9000],
            (0..300).map(|i| i * 97 + 5).collect::<Vec<_>>(),
            // Dense, but odd ports test one more field: a jump table, not
            // a value table.
            (2000..2012).map(|p| p | 1 << 16).collect(),
        ] {
            let programs: Vec<Program> = ports
                .iter()
                .map(|&p| {
                    let mut tests = vec![
                        eq(Base::Link, 12, Size::H, 0x0800),
                        eq(Base::Link, 23, Size::B, 6),
                        eq(Base::Transport, 2, Size::H, p & 0xffff),
                    ];
                    if p >> 16 == 1 && p % 2 == 1 {
                        tests.push(eq(Base::Transport, 13, Size::B, 0));
                    }
                    all_of(&tests)
                })
                .collect();
            let ports: Vec<u32> = ports.iter().map(|p| p & 0xffff).collect();
            let analyses: Vec<_> = programs.iter().map(analyze).collect();
            let cands: Vec<_> = analyses
                .iter()
                .enumerate()
                .map(|(i, a)| Candidate {
                    owner: 100 + i as u32,
                    analysis: a,
                })
                .collect();
            let m = merge(&cands);
            let st = m.stats();
            seen.linear += st.linear;
            seen.binary += st.binary;
            seen.table += st.table;
            seen.hash += st.hash;
            let native = generate(&mut Func::new(), &m).unwrap();
            let reference = generate(&mut Func::<Reference>::with_backend(), &m).unwrap();
            // SAFETY: the classifier reads `len` bytes from `pkt` at most.
            let f = unsafe { native.as_fn::<extern "C" fn(*const u8, u64, u64) -> u64>() }.unwrap();
            for probe in ports.iter().copied().chain([0, 1, 81, 65535]) {
                let pkt = packet(probe as u16);
                for cut in [pkt.len(), 37, 36, 15, 14, 0] {
                    let pkt = &pkt[..cut];
                    let want = m.classify(pkt);
                    let native = owner(f(pkt.as_ptr(), pkt.len() as u64, pkt.len() as u64));
                    assert_eq!(native, want, "{ports:?} {probe} {cut}");
                    assert_eq!(owner(run_ref(&reference, pkt, cut as u32)), want);
                    let alone = programs.iter().position(|p| p.matches(pkt));
                    assert_eq!(want, alone.map(|i| 100 + i as u32));
                }
            }
        }
        assert!(seen.linear > 0 && seen.binary > 0 && seen.table > 0 && seen.hash > 0);
    }

    /// Computed values (`len`, arithmetic, loads at computed offsets,
    /// division by a loaded zero, shifts of 32 and more) in residuals:
    /// the native and reference backends agree with the reference
    /// evaluator on every truncation of frames that exercise them, each
    /// read as a whole frame and as a capture's record cut from a longer
    /// packet (`len` the wire's length, loads bounded by the bytes).
    #[test]
    fn computed_values_agree_with_the_reference_evaluator() {
        let filters = [
            "len >= 60",
            "less 20 or greater 100",
            "ip[2:2] - ((ip[0] & 0xf) << 2) > 20",
            "tcp[((tcp[12] & 0xf0) >> 2):4] = 0x47455420",
            "ether[len - 1] = 0x20",
            "ip[1] / ip[2] = 3 or ip[1] % ip[2] = 1",
            "ip[1] << ip[3] = 0 and ip[1] >> (ip[3] + 2) = 0",
            "-ip[1] * 3 ^ ip[2] | 7 != ip[3] - 1",
            "ip[ip[3]] = ip[3] and ether[12:2] - 0x800 = 0",
            "icmp6[icmp6type] = icmp6-echo",
            // Behind a tag, transport fields are computed values, masked.
            "vlan and tcp[13] & 0x12 = 0x12 and tcp dst port 80",
            // In the packet a Geneve frame carries, every field is one.
            "geneve 5 and vlan and ip[0] & 0xf = 6 and tcp dst port 80",
            "vlan and geneve and ether[0] = 0xff",
            "geneve and tcp dst port 80",
        ];
        let (programs, m) = compiled_and_merged(&filters);
        let native = generate(&mut Func::new(), &m).unwrap();
        let reference = generate(&mut Func::<Reference>::with_backend(), &m).unwrap();
        // SAFETY: the classifier reads `len` bytes from `pkt` at most.
        let f = unsafe { native.as_fn::<extern "C" fn(*const u8, u64, u64) -> u64>() }.unwrap();
        let mut tcp = packet(80);
        tcp.extend_from_slice(b"GET / HTTP/1.0");
        tcp[16..18].copy_from_slice(&40u16.to_be_bytes());
        tcp[46] = 0x50;
        let mut icmp6 = vec![0u8; 70];
        icmp6[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
        icmp6[20] = 58;
        icmp6[54] = 128;
        let mut arith = packet(7);
        arith[15..18].copy_from_slice(&[7, 2, 33]);
        let mut zero = arith.clone();
        zero[16] = 0;
        let mut tagged = packet(80);
        tagged.splice(12..12, [0x81, 0x00, 0x00, 0x05]);
        tagged[18] = 0x46;
        tagged[18 + 24 + 13] = 0x12;
        tagged.extend([0u8; 8]);
        tagged[18 + 24 + 2..18 + 24 + 4].copy_from_slice(&80u16.to_be_bytes());
        let check = |frame: &Vec<u8>| agree_at_every_cut(&m, &programs, f, &reference, frame);
        // Geneve frames: IPv4 outside (IHL 6, two words of options, VNI
        // 5) carrying a tagged Ethernet frame; IPv6 outside carrying bare
        // IPv4 (IHL 6) under protocol 0x0800; and a tagged one carrying
        // Ethernet to the broadcast address.
        let geneve = |outer: &[u8], words: u8, proto: u16, vni: u32, inner: &[u8]| {
            let mut f = vec![0u8; 12];
            f.extend_from_slice(outer);
            f.extend([0x9c, 0x40, 0x17, 0xc1, 0, 0, 0, 0, words, 0]);
            f.extend(proto.to_be_bytes());
            f.extend((vni << 8).to_be_bytes());
            f.extend(std::iter::repeat_n(0x45, 4 * usize::from(words)));
            f.extend_from_slice(inner);
            f
        };
        let mut v4 = vec![0x08, 0x00, 0x46, 0, 0, 0, 0, 0, 0, 0, 64, 17];
        v4.resize(2 + 24, 0);
        let mut v6 = vec![0x86, 0xdd, 0x60, 0, 0, 0, 0, 0, 17, 64];
        v6.resize(2 + 40, 0);
        let inner_ip = &tagged[18..];
        let mut inner_eth = tagged.clone();
        inner_eth[0..6].copy_from_slice(&[0xff; 6]);
        let g4 = geneve(&v4, 2, 0x6558, 5, &tagged);
        let g6 = geneve(&v6, 0, 0x0800, 5, inner_ip);
        let mut g_tag = geneve(&v4, 0, 0x6558, 1, &inner_eth);
        g_tag.splice(12..12, [0x81, 0x00, 0x00, 0x07]);
        for frame in [
            &tcp,
            &icmp6,
            &arith,
            &zero,
            &tagged,
            &vec![0x20u8; 120],
            &g4,
            &g6,
            &g_tag,
        ] {
            check(frame);
        }
        // The Geneve filters alone, so that nothing before them decides.
        let geneve_filters = &filters[filters.len() - 3..];
        let (programs, m) = compiled_and_merged(geneve_filters);
        let native = generate(&mut Func::new(), &m).unwrap();
        let reference = generate(&mut Func::<Reference>::with_backend(), &m).unwrap();
        // SAFETY: as above.
        let f = unsafe { native.as_fn::<extern "C" fn(*const u8, u64, u64) -> u64>() }.unwrap();
        assert_eq!(m.classify(&g4), Some(0));
        assert_eq!(m.classify(&g6), Some(2));
        assert_eq!(m.classify(&g_tag), Some(1));
        let check = |frame: &Vec<u8>| agree_at_every_cut(&m, &programs, f, &reference, frame);
        for frame in [&g4, &g6, &g_tag, &tagged] {
            check(frame);
        }
    }
}
