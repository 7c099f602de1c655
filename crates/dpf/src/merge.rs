//! Merging a table of filters into one decision structure (the paper's
//! §4.2), and that structure's reference evaluator.
//!
//! DPF's point is that filters installed by many endpoints share most of
//! their tests: every TCP/IP filter checks the Ethernet type, the IP
//! protocol and the fragment offset, and the filters then differ only in
//! the constant a port or an address is compared with. Merging runs each
//! shared test once and turns "compare this field with one of N constants"
//! into one dispatch.
//!
//! # Atoms and residuals
//!
//! [`analyze`] splits one filter's [`Program`] into
//! * its *atoms*: the equality tests `field & mask == value` that every
//!   accepting path of the program passes through, so that the filter
//!   matches only if all of them hold; and
//! * a *residual*: the program restricted to packets where the atoms hold,
//!   which is `None` when that restriction is the constant "accept" (as it
//!   is for the usual `tcp dst port 80 and dst host ...` conjunctions).
//!
//! Before the atoms are sought, `x >= v` followed by `x > v` on the same
//! masked field (a one-port `portrange v`, as libpcap lowers it) is read as
//! `x == v` followed by `x > v`: the same load, the same outcome on every
//! frame, and an equality that can be an atom.
//!
//! A filter matches exactly when its atoms hold and its residual accepts.
//! That is exact even under libpcap's abort-on-short-load rule: an atom
//! that cannot be loaded fails, and the program could not have accepted
//! without loading it; a residual is evaluated with its own aborts, and a
//! test is dropped from it only when an atom on the same field already
//! read that field (so the load is known to be in bounds).
//!
//! # The trie
//!
//! [`Merged`] is a trie over the atoms, taken in one canonical order of
//! their keys (field, then mask). A [`MNode`] holds the filters whose
//! atoms are all matched on the path to it, a [`Dispatch`] on the next
//! key, whose arms lead to the filters comparing that key with each
//! constant, and a *wild* child for the filters that do not test that key
//! at all. Evaluation explores the arm the packet selects and then the
//! wild child, keeping the best match so far and pruning every subtree
//! whose best filter cannot beat it; a filter's rank (its position in
//! priority order, ties broken by installation order) makes "best" a
//! single integer comparison.
//!
//! Each dispatch picks its strategy from the key set actually present
//! ([`Strategy`]): a short linear compare, a binary search for sparse
//! keys, a jump table for dense keys, or a multiplicative hash chosen
//! among several multipliers and table sizes for the fewest collisions.

use crate::ir::{ACCEPT, Cmp, Field, Node, NodeId, Program, REJECT, Test};
use std::collections::HashMap;

/// What a dispatch loads: a field and the mask applied to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    /// The field.
    pub field: Field,
    /// The mask.
    pub mask: u32,
}

/// A necessary equality test: `key.field & key.mask == value`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Atom {
    /// The field and mask.
    pub key: Key,
    /// The constant.
    pub value: u32,
}

/// One filter, split for merging (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Analysis {
    /// The atoms, sorted by key, one per key.
    pub atoms: Vec<Atom>,
    /// The rest of the filter, given the atoms; `None` when nothing is left.
    pub residual: Option<Program>,
    /// The filter can never match (contradictory atoms, or a program that
    /// rejects everything).
    pub never: bool,
    /// The filter split into alternatives it matches exactly when one of
    /// them does, each with its own atoms and residual (see [`analyze`]);
    /// empty when it is not split. The merger installs each as an entry of
    /// its own, for the same owner, at adjacent ranks.
    pub alternatives: Vec<Analysis>,
}

impl Analysis {
    /// What the merger installs for this filter: its alternatives, or the
    /// filter itself when it is not split.
    pub fn parts(&self) -> &[Analysis] {
        if self.alternatives.is_empty() {
            std::slice::from_ref(self)
        } else {
            &self.alternatives
        }
    }
}

/// The most atoms a filter contributes to the trie (one trie level
/// each); a filter with more keeps the rest in its residual.
pub const MAX_ATOMS: usize = 64;

/// The most alternatives a filter is split into ([`analyze`]); a filter
/// that would need more is not split.
pub const MAX_ALTERNATIVES: usize = 16;

/// The largest residual (its nodes and computed values together) a filter
/// is split with ([`analyze`]): each alternative carries a copy of its
/// share of the residual, and every later publication of the table
/// compiles all of them, so a client's filter near dpf's limits would
/// cost every other client's installs several times over (`vlan and
/// geneve and` 2,000 `tcp port`s: 55 ms a later install split six ways,
/// 10 ms whole). The split is for the small filters a table holds many
/// of, one per VNI, which is where merging pays.
pub const MAX_SPLIT_RESIDUAL: usize = 256;

/// Splits `p` into atoms and a residual.
///
/// The atoms are found to a fixpoint: restricting the program by the
/// atoms found so far removes branches they contradict (the IPv6 or ARP
/// alternatives of `tcp` or `host`, say), which can reveal more tests that
/// every remaining accepting path takes.
///
/// A filter with a `geneve` is then split into
/// [alternatives](Analysis::alternatives): libpcap's `geneve` is (IPv4
/// outer tests) or (IPv6 outer tests), which share no test, so the
/// filter as a whole has no atom (or none past a `pppoes`'s), not even
/// its VNI, and would be tried by every frame. When the residual's first
/// test is an equality on a packet field (the EtherType, or the PPP
/// protocol in a PPPoE session), the residual `t ? A : B` is exactly
/// `(t ? A : reject) or (t ? reject : B)`: both load `t`'s field first,
/// so a frame too short for it is rejected by both, as by the filter, and
/// otherwise exactly one of them goes on as the filter does, with the
/// same loads in the same order (so the same aborts). Each side is
/// analyzed again, with the filter's atoms added, and split again at its
/// own residual's first test (the EtherTypes of `vlan` then those of the
/// outer family), while every side gains an atom, to at most
/// [`MAX_ALTERNATIVES`] and [`MAX_ATOMS`]; a split that cannot keep to
/// that is not made, nor one of a residual larger than
/// [`MAX_SPLIT_RESIDUAL`]. A side that can never match is dropped. A chain of
/// such tests on one field (`vlan`'s three EtherTypes) gives a side per
/// test and one for what follows them all (see `split_once`).
pub fn analyze(p: &Program) -> Analysis {
    let whole = analyze_whole(p);
    if whole.never
        || !reads_geneve(whole.residual.as_ref())
        || whole
            .residual
            .as_ref()
            .is_some_and(|r| r.nodes.len() + r.values.len() > MAX_SPLIT_RESIDUAL)
    {
        return whole;
    }
    match split(&whole) {
        Some(alternatives) if alternatives.len() > 1 => Analysis {
            alternatives,
            ..whole
        },
        _ => whole,
    }
}

/// Whether a residual loads through a Geneve header.
fn reads_geneve(p: Option<&Program>) -> bool {
    p.is_some_and(|p| {
        p.values
            .iter()
            .flatten()
            .any(|op| matches!(op, crate::ir::Op::Load(crate::ir::LoadBase::Geneve(_), _)))
    })
}

/// `whole` as alternatives (see [`analyze`]), `None` when a bound is
/// exceeded. An alternative is split until a split would leave a side
/// without a new atom; it is then kept as it is.
fn split(whole: &Analysis) -> Option<Vec<Analysis>> {
    let mut done = Vec::new();
    let mut todo = vec![whole.clone()];
    while let Some(a) = todo.pop() {
        match split_once(&a)? {
            Some(sides) => {
                // Popped last first: pushed in reverse, they come out in
                // program order (then before else).
                todo.extend(sides.into_iter().rev());
            }
            None => done.push(a),
        }
        if done.len() + todo.len() > MAX_ALTERNATIVES {
            return None;
        }
    }
    Some(done)
}

/// `a` split at its residual's first tests: `Some(Some(sides))`, the
/// sides that can match; `Some(None)` when `a` is not split, because the
/// first test is no equality on a packet field or a side gains no atom;
/// `None` when a side has more than [`MAX_ATOMS`] atoms.
///
/// The residual's first test `t1` and the chain of equalities on the same
/// field along its `else` edges (`t1 ? A1 : t2 ? A2 : ... : B`, as
/// libpcap tests the EtherTypes of `vlan`, or IPv4 then IPv6) give a side
/// per test, `t1 ? reject : ... ti ? Ai : reject` (whose atoms include
/// `ti`), and one for `B` past them all. Each side loads the field first,
/// as the residual does, so a frame too short for it is rejected by all;
/// on any other frame exactly one side takes the residual's path, with
/// the same loads in the same order, and the others reject without
/// another load.
fn split_once(a: &Analysis) -> Option<Option<Vec<Analysis>>> {
    let Some(r) = a.residual.as_ref() else {
        return Some(None);
    };
    let is_chain_test = |id: NodeId, field| match r.nodes[id as usize] {
        Node::Test { test, .. } => {
            test.field == field && matches!(edge_atoms(&test), (Some(_), None))
        }
        _ => false,
    };
    let Node::Test { test: first, .. } = r.nodes[r.root as usize] else {
        return Some(None);
    };
    if !is_chain_test(r.root, first.field) {
        return Some(None);
    }
    let mut chain = vec![r.root];
    while let Node::Test { els, .. } = r.nodes[*chain.last().expect("not empty") as usize]
        && is_chain_test(els, first.field)
        && chain.len() < MAX_ALTERNATIVES
    {
        chain.push(els);
    }
    let mut sides = Vec::new();
    for i in 0..=chain.len() {
        let side = chain_side(r, &chain, i);
        if side.root == REJECT {
            continue;
        }
        let b = analyze_whole(&side);
        if b.never {
            continue;
        }
        let mut atoms = a.atoms.clone();
        for x in b.atoms {
            if let Err(at) = atoms.binary_search(&x) {
                atoms.insert(at, x);
            }
        }
        if atoms.windows(2).any(|w| w[0].key == w[1].key) {
            // Contradicts the filter's own atoms: this side never matches.
            continue;
        }
        if atoms.len() == a.atoms.len() {
            return Some(None);
        }
        if atoms.len() > MAX_ATOMS {
            return None;
        }
        sides.push(Analysis {
            atoms,
            residual: b.residual,
            never: false,
            alternatives: Vec::new(),
        });
    }
    // No side can match: the filter never does, which the filter left
    // whole says as well (it is tried, and rejects).
    Some((!sides.is_empty()).then_some(sides))
}

/// The side `i` of `r` split along `chain` ([`split_once`]): fresh copies
/// of the chain's first `i + 1` tests (all of them for the last side, `i
/// == chain.len()`), the earlier ones leading to reject when they hold,
/// the `i`th to its own `then` and to reject otherwise (the last side's
/// last copy to its own `else`), ahead of `r`'s nodes, which are
/// unchanged (another path may reach a test of the chain). Its root is
/// [`REJECT`] when the last side is: the chain's `else` is reject.
fn chain_side(r: &Program, chain: &[NodeId], i: usize) -> Program {
    let last = i == chain.len();
    let copies = chain.len().min(i + 1);
    let shift = |id: NodeId| if id < 2 { id } else { id + copies as NodeId };
    let mut nodes = vec![Node::Reject, Node::Accept];
    for (j, &c) in chain[..copies].iter().enumerate() {
        let Node::Test { test, then, els } = r.nodes[c as usize] else {
            unreachable!("the chain is tests")
        };
        let next = (2 + j + 1) as NodeId;
        let (then, els) = match (j + 1 == copies, last) {
            (false, _) => (REJECT, next),
            (true, false) => (shift(then), REJECT),
            (true, true) if els == REJECT => {
                return Program {
                    nodes: vec![Node::Reject, Node::Accept],
                    root: REJECT,
                    values: Vec::new(),
                };
            }
            (true, true) => (REJECT, shift(els)),
        };
        nodes.push(Node::Test { test, then, els });
    }
    nodes.extend(r.nodes[2..].iter().map(|n| match *n {
        Node::Test { test, then, els } => Node::Test {
            test,
            then: shift(then),
            els: shift(els),
        },
        other => other,
    }));
    Program {
        nodes,
        root: 2,
        values: r.values.clone(),
    }
}

/// [`analyze`] without the split into alternatives.
fn analyze_whole(p: &Program) -> Analysis {
    let never = Analysis {
        atoms: Vec::new(),
        residual: None,
        never: true,
        alternatives: Vec::new(),
    };
    let mut atoms: Vec<Atom> = Vec::new();
    // Restricting by no facts rewrites one-value ranges as equalities.
    let p = &restrict(p, &[]);
    let mut prog = p.clone();
    loop {
        let Some(found) = necessary(&prog) else {
            return never;
        };
        let before = atoms.len();
        for a in found {
            if let Err(at) = atoms.binary_search(&a) {
                atoms.insert(at, a);
            }
        }
        // Two different constants for one key: nothing can match.
        if atoms.windows(2).any(|w| w[0].key == w[1].key) {
            return never;
        }
        if atoms.len() == before {
            break;
        }
        prog = restrict(&prog, &atoms);
        if prog.root == ACCEPT || prog.root == REJECT {
            break;
        }
    }
    if atoms.len() > MAX_ATOMS {
        // The trie is one level per atom: keep its depth (and the stack
        // its builders and evaluators use) bounded. The atoms dropped
        // stay in the residual, which then tests them.
        atoms.truncate(MAX_ATOMS);
        prog = restrict(p, &atoms);
    }
    match prog.root {
        REJECT => never,
        ACCEPT => Analysis {
            atoms,
            residual: None,
            never: false,
            alternatives: Vec::new(),
        },
        _ => Analysis {
            atoms,
            residual: Some(prog),
            never: false,
            alternatives: Vec::new(),
        },
    }
}

/// The atoms on every accepting path of `p`, or `None` if no path accepts.
fn necessary(p: &Program) -> Option<Vec<Atom>> {
    // nec[i]: the atoms on every accepting path from node i; None for a
    // node with no accepting path (the identity of the intersection).
    let mut nec: Vec<Option<Vec<Atom>>> = vec![None; p.nodes.len()];
    nec[ACCEPT as usize] = Some(Vec::new());
    // uses[i]: the edges into node i not yet followed. A node's set is
    // moved into its last user rather than copied, so a chain of
    // thousands of tests holds a few sets at a time instead of one per
    // node (quadratic memory: 860 MB for 4,095 `vlan`s).
    let mut uses = vec![0u32; p.nodes.len()];
    uses[p.root as usize] += 1;
    for node in &p.nodes {
        if let Node::Test { then, els, .. } = *node {
            uses[then as usize] += 1;
            uses[els as usize] += 1;
        }
    }
    let mut follow = |nec: &mut [Option<Vec<Atom>>], to: NodeId, a: Option<Atom>| {
        let to = to as usize;
        uses[to] -= 1;
        let v = if uses[to] == 0 {
            nec[to].take()
        } else {
            nec[to].clone()
        };
        v.map(|mut v| {
            if let Some(a) = a
                && let Err(at) = v.binary_search(&a)
            {
                v.insert(at, a);
            }
            v
        })
    };
    // Edges point to higher indices (and to the two leaves, set above).
    for i in (2..p.nodes.len()).rev() {
        let Node::Test { test, then, els } = p.nodes[i] else {
            continue;
        };
        let (on_then, on_els) = edge_atoms(&test);
        let t = follow(&mut nec, then, on_then);
        let e = follow(&mut nec, els, on_els);
        nec[i] = match (t, e) {
            (None, e) => e,
            (t, None) => t,
            (Some(t), Some(e)) => Some(intersect(t, &e)),
        };
    }
    nec[p.root as usize].take()
}

/// The atoms of both sorted sets, in one pass over each: a filter with
/// thousands of tests keeps thousands of atoms on a path, and testing each
/// against the other set by a scan made the analysis cubic in the filter's
/// length (2,000 `vlan`s took two seconds).
fn intersect(mut t: Vec<Atom>, e: &[Atom]) -> Vec<Atom> {
    let mut j = 0;
    t.retain(|a| {
        while j < e.len() && e[j] < *a {
            j += 1;
        }
        j < e.len() && e[j] == *a
    });
    t
}

/// The atoms a test establishes on its `then` and `else` edges: an
/// equality on `then`, and for a bit test (BPF's `jset`) "these bits are
/// clear" on `else`, which is how libpcap tests the fragment offset.
fn edge_atoms(t: &Test) -> (Option<Atom>, Option<Atom>) {
    // A computed value is the program's own (its index means nothing in
    // another filter): never an atom, always left in the residual.
    if matches!(t.field.base, crate::ir::Base::Value(_)) {
        return (None, None);
    }
    let all = size_mask(t.field);
    let atom = |mask: u32, value: u32| {
        let mask = mask & all;
        (mask != 0 && value & !mask == 0).then_some(Atom {
            key: Key {
                field: t.field,
                mask,
            },
            value,
        })
    };
    match t.cmp {
        Cmp::Eq => (atom(t.mask, t.value), None),
        Cmp::Set => (None, atom(t.mask & t.value, 0)),
        Cmp::Gt | Cmp::Ge => (None, None),
    }
}

/// All ones over a field's width.
fn size_mask(f: Field) -> u32 {
    match f.size {
        crate::ir::Size::B => 0xff,
        crate::ir::Size::H => 0xffff,
        crate::ir::Size::W => u32::MAX,
    }
}

/// The outcome of `t` when `facts` hold, if they decide it. Only facts on
/// the same field count: they prove the load in bounds.
fn outcome(t: &Test, facts: &[Atom]) -> Option<bool> {
    let (mut known, mut bits) = (0u32, 0u32);
    for a in facts.iter().filter(|a| a.key.field == t.field) {
        known |= a.key.mask;
        bits |= a.value & a.key.mask;
    }
    if known == 0 {
        return None;
    }
    // The bits the test's outcome depends on.
    let relevant = match t.cmp {
        Cmp::Set => t.mask & t.value,
        _ => t.mask,
    } & size_mask(t.field);
    if relevant & !known == 0 {
        return Some(t.holds(bits));
    }
    // Partly known: an equality already contradicted by the known bits.
    let overlap = t.mask & known;
    (t.cmp == Cmp::Eq && (bits ^ t.value) & overlap != 0).then_some(false)
}

/// `p` with every test that `facts` decide replaced by its outcome.
fn restrict(p: &Program, facts: &[Atom]) -> Program {
    let mut b = Builder::new();
    let mut memo: HashMap<NodeId, NodeId> = HashMap::new();
    let root = restrict_node(p, p.root, facts, &mut b, &mut memo);
    let mut restricted = b.finish(root);
    restricted.values = p.values.clone();
    restricted
}

/// [`restrict`]'s walk, in the order of a depth-first postorder (then
/// before else) but with a heap stack: a program may be thousands of tests
/// deep.
fn restrict_node(
    p: &Program,
    root: NodeId,
    facts: &[Atom],
    b: &mut Builder,
    memo: &mut HashMap<NodeId, NodeId>,
) -> NodeId {
    enum Step {
        Enter(NodeId),
        /// The node is decided: it becomes what its successor becomes.
        Alias(NodeId, NodeId),
        /// Both successors are done.
        Build(NodeId),
    }
    let mut stack = vec![Step::Enter(root)];
    while let Some(step) = stack.pop() {
        match step {
            Step::Enter(id) => {
                if memo.contains_key(&id) {
                    continue;
                }
                match p.nodes[id as usize] {
                    Node::Reject => {
                        memo.insert(id, REJECT);
                    }
                    Node::Accept => {
                        memo.insert(id, ACCEPT);
                    }
                    Node::Test { test, then, els } => match outcome(&test, facts) {
                        Some(holds) => {
                            let to = if holds { then } else { els };
                            stack.push(Step::Alias(id, to));
                            stack.push(Step::Enter(to));
                        }
                        None => {
                            stack.push(Step::Build(id));
                            stack.push(Step::Enter(els));
                            stack.push(Step::Enter(then));
                        }
                    },
                }
            }
            Step::Alias(id, to) => {
                let n = memo[&to];
                memo.insert(id, n);
            }
            Step::Build(id) => {
                let Node::Test { test, then, els } = p.nodes[id as usize] else {
                    unreachable!("only tests are built")
                };
                let (t, e) = (memo[&then], memo[&els]);
                // `x >= v` then `x > v` on the same masked field (a
                // one-port `portrange`): `x == v` leads where `x > v`
                // failed, and `x > v` decides the rest, so that the
                // equality becomes an atom. The same load, so the same
                // verdict on a short frame.
                let n = match b.nodes.get(t as usize) {
                    Some(&Node::Test {
                        test: inner,
                        then: it,
                        els: ie,
                    }) if t > ACCEPT
                        && test.cmp == Cmp::Ge
                        && inner.cmp == Cmp::Gt
                        && (inner.field, inner.mask, inner.value)
                            == (test.field, test.mask, test.value) =>
                    {
                        let rest = b.test(inner, it, e);
                        b.test(
                            Test {
                                cmp: Cmp::Eq,
                                ..test
                            },
                            ie,
                            rest,
                        )
                    }
                    _ => b.test(test, t, e),
                };
                memo.insert(id, n);
            }
        }
    }
    memo[&root]
}

/// Builds a [`Program`] bottom-up (children before parents), sharing
/// equal nodes, then renumbers it so that edges point forward.
struct Builder {
    nodes: Vec<Node>,
    index: HashMap<Node, NodeId>,
}

impl Builder {
    fn new() -> Self {
        Builder {
            nodes: vec![Node::Reject, Node::Accept],
            index: HashMap::new(),
        }
    }

    /// A test node. One whose edges agree is kept: its load still rejects
    /// a packet too short for it (as libpcap's optimizer keeps it).
    fn test(&mut self, test: Test, then: NodeId, els: NodeId) -> NodeId {
        let node = Node::Test { test, then, els };
        *self.index.entry(node).or_insert_with(|| {
            self.nodes.push(node);
            (self.nodes.len() - 1) as NodeId
        })
    }

    /// Nodes were pushed children first; reversing the tests gives every
    /// edge a higher target index.
    fn finish(self, root: NodeId) -> Program {
        let n = self.nodes.len() as NodeId;
        let map = |id: NodeId| if id < 2 { id } else { n + 1 - id };
        let mut nodes = vec![Node::Reject, Node::Accept];
        for node in self.nodes[2..].iter().rev() {
            let Node::Test { test, then, els } = *node else {
                unreachable!("only tests are pushed")
            };
            nodes.push(Node::Test {
                test,
                then: map(then),
                els: map(els),
            });
        }
        Program {
            nodes,
            root: map(root),
            values: Vec::new(),
        }
    }
}

/// An index into [`Merged::nodes`].
pub type MNodeId = u32;

/// One filter of a merged table, by rank.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The filter's owner (an endpoint).
    pub owner: u32,
    /// The end of its farthest link-relative atom.
    pub link_need: u32,
    /// The rest of the filter once its atoms hold.
    pub residual: Option<Program>,
}

/// How a dispatch finds the arm for a value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// Compare with each key in turn (few keys).
    Linear,
    /// Binary search over the sorted keys (sparse keys).
    Binary,
    /// Index a table by `value - min` (dense keys).
    Table {
        /// The smallest key.
        min: u32,
        /// The table's length: the key range.
        len: u32,
    },
    /// Index a table by `(value * mul) >> (32 - bits)`, then compare with
    /// the keys of that bucket (one compare when `max_bucket` is 1).
    Hash {
        /// The multiplier.
        mul: u32,
        /// log2 of the table length.
        bits: u32,
        /// The largest number of keys in one bucket.
        max_bucket: usize,
    },
}

impl Strategy {
    /// The bucket of `value` under [`Strategy::Hash`].
    pub fn hash(mul: u32, bits: u32, value: u32) -> u32 {
        value.wrapping_mul(mul) >> (32 - bits)
    }
}

/// A dispatch on one key.
#[derive(Clone, Debug)]
pub struct Dispatch {
    /// What is loaded.
    pub key: Key,
    /// The constants and their subtrees, sorted by constant.
    pub arms: Vec<(u32, MNodeId)>,
    /// How the arm is found.
    pub strategy: Strategy,
}

/// A node of the merged trie.
#[derive(Clone, Debug)]
pub struct MNode {
    /// Filters (ranks, ascending) whose atoms all hold on the path here.
    pub leaves: Vec<u32>,
    /// The dispatch on the next key.
    pub dispatch: Option<Dispatch>,
    /// The subtree of the filters that do not test the dispatch's key.
    pub wild: Option<MNodeId>,
    /// The best (lowest) rank in this subtree.
    pub min_rank: u32,
    /// Frame bytes (from the link header) that every filter of this
    /// subtree needs present to match: the least, over its filters, of the
    /// end of their farthest link-relative atom. A packet shorter than
    /// this matches nothing here, so one length check can cover every
    /// load on the way.
    pub link_need: u32,
}

/// A merged table: the trie and its filters in rank order.
#[derive(Clone, Debug)]
pub struct Merged {
    /// The trie; [`Merged::root`] is its root.
    pub nodes: Vec<MNode>,
    /// The root, `None` for an empty table.
    pub root: Option<MNodeId>,
    /// The filters, indexed by rank (a filter split into alternatives is
    /// an entry per alternative, at adjacent ranks).
    pub entries: Vec<Entry>,
}

/// Multipliers a hash dispatch chooses among (odd, with well-mixed high
/// bits: golden-ratio and murmur/xxhash constants).
const MULTIPLIERS: [u32; 8] = [
    0x9e37_79b1,
    0x85eb_ca6b,
    0xc2b2_ae35,
    0x27d4_eb2f,
    0x1656_67b1,
    0xcc9e_2d51,
    0x1b87_3593,
    0x7feb_352d,
];

/// Picks the dispatch strategy for a sorted, distinct key set.
pub fn choose_strategy(keys: &[u32]) -> Strategy {
    let n = keys.len();
    if n <= 4 {
        return Strategy::Linear;
    }
    let (min, max) = (keys[0], keys[n - 1]);
    let range = u64::from(max - min) + 1;
    if range <= 2 * n as u64 + 8 && range <= 1 << 16 {
        return Strategy::Table {
            min,
            len: range as u32,
        };
    }
    if n <= 16 {
        return Strategy::Binary;
    }
    let base = usize::BITS - (n - 1).leading_zeros();
    let mut best: Option<(usize, usize, u32, u32)> = None;
    for bits in base..=(base + 2).min(20) {
        let mut counts = vec![0u32; 1 << bits];
        for &mul in &MULTIPLIERS {
            counts.iter_mut().for_each(|c| *c = 0);
            let mut collisions = 0;
            for &k in keys {
                let c = &mut counts[Strategy::hash(mul, bits, k) as usize];
                collisions += (*c > 0) as usize;
                *c += 1;
            }
            let max_bucket = *counts.iter().max().unwrap_or(&0) as usize;
            let score = (max_bucket, collisions, bits, mul);
            if best.is_none_or(|b| (score.0, score.1) < (b.0, b.1)) {
                best = Some(score);
            }
        }
        if best.is_some_and(|b| b.0 == 1) {
            break;
        }
    }
    let (max_bucket, _, bits, mul) = best.expect("n > 16 keys were hashed");
    Strategy::Hash {
        mul,
        bits,
        max_bucket,
    }
}

/// One filter as the merger takes it, or one of its
/// [alternatives](Analysis::alternatives) (the table passes each of a
/// split filter's [`Analysis::parts`] as a candidate, for its owner, in
/// its place in rank order). A split filter passed whole merges as well:
/// its own atoms and residual are exact, only less selective.
#[derive(Clone, Debug)]
pub struct Candidate<'a> {
    /// The owner returned when the filter wins.
    pub owner: u32,
    /// Its analysis (its [`Analysis::alternatives`] are not read).
    pub analysis: &'a Analysis,
}

/// Merges filters given in rank order (best first).
pub fn merge(filters: &[Candidate<'_>]) -> Merged {
    let entries = filters
        .iter()
        .map(|c| Entry {
            owner: c.owner,
            link_need: c
                .analysis
                .atoms
                .iter()
                .filter(|a| a.key.field.base == crate::ir::Base::Link)
                .map(|a| a.key.field.offset + a.key.field.size as u32)
                .max()
                .unwrap_or(0),
            residual: c.analysis.residual.clone(),
        })
        .collect();
    let mut m = Merged {
        nodes: Vec::new(),
        root: None,
        entries,
    };
    let live: Live<'_> = filters
        .iter()
        .enumerate()
        .filter(|(_, c)| !c.analysis.never)
        .map(|(rank, c)| (rank as u32, c.analysis.atoms.as_slice()))
        .collect();
    if !live.is_empty() {
        let needs: Vec<u32> = m.entries.iter().map(|e| e.link_need).collect();
        // At most one node per atom and one per filter, plus the root:
        // reserved up front, the nodes are never moved by regrowth.
        m.nodes
            .reserve(1 + live.len() + live.iter().map(|f| f.1.len()).sum::<usize>());
        m.root = Some(build(&mut m.nodes, &needs, live));
    }
    m
}

/// Filters during the build: (rank, atoms still to test).
type Live<'a> = Vec<(u32, &'a [Atom])>;

/// Builds the subtree for `filters`: recursion into each arm (one level
/// per atom, at most [`MAX_ATOMS`]), a loop along the wild chain (one node
/// per distinct key, which the table's size alone bounds).
fn build(nodes: &mut Vec<MNode>, needs: &[u32], filters: Live<'_>) -> MNodeId {
    let mut filters = filters;
    let mut first: Option<MNodeId> = None;
    let mut prev: Option<MNodeId> = None;
    loop {
        let min_rank = filters.iter().map(|f| f.0).min().unwrap_or(u32::MAX);
        let link_need = filters
            .iter()
            .map(|f| needs[f.0 as usize])
            .min()
            .unwrap_or(0);
        let mut leaves = Vec::new();
        let mut rest = Vec::new();
        for f in filters {
            if f.1.is_empty() {
                leaves.push(f.0);
            } else {
                rest.push(f);
            }
        }
        leaves.sort_unstable();
        let id = nodes.len() as MNodeId;
        nodes.push(MNode {
            leaves,
            dispatch: None,
            wild: None,
            min_rank,
            link_need,
        });
        match prev {
            Some(p) => nodes[p as usize].wild = Some(id),
            None => first = Some(id),
        }
        let first = first.expect("set above");
        let Some(key) = rest.iter().map(|f| f.1[0].key).min() else {
            return first;
        };
        let (on_key, wild): (Vec<_>, Vec<_>) = rest.into_iter().partition(|f| f.1[0].key == key);
        let mut groups: Vec<(u32, Live<'_>)> = Vec::new();
        let mut on_key = on_key;
        on_key.sort_by_key(|f| f.1[0].value);
        for (rank, atoms) in on_key {
            let v = atoms[0].value;
            match groups.last_mut() {
                Some((gv, g)) if *gv == v => g.push((rank, &atoms[1..])),
                _ => groups.push((v, vec![(rank, &atoms[1..])])),
            }
        }
        let keys: Vec<u32> = groups.iter().map(|g| g.0).collect();
        let strategy = choose_strategy(&keys);
        let arms = groups
            .into_iter()
            .map(|(v, g)| (v, build(nodes, needs, g)))
            .collect();
        nodes[id as usize].dispatch = Some(Dispatch {
            key,
            arms,
            strategy,
        });
        if wild.is_empty() {
            return first;
        }
        prev = Some(id);
        filters = wild;
    }
}

impl Dispatch {
    /// The arm for `value`, found by the dispatch's own strategy (so that
    /// the reference evaluator exercises the same decision structure the
    /// native code implements).
    pub fn find(&self, value: u32) -> Option<MNodeId> {
        let arms = &self.arms;
        let search = || {
            arms.binary_search_by_key(&value, |a| a.0)
                .ok()
                .map(|i| arms[i].1)
        };
        match self.strategy {
            Strategy::Linear => arms.iter().find(|a| a.0 == value).map(|a| a.1),
            Strategy::Binary => search(),
            // The range check first, as the jump table's bound is.
            Strategy::Table { min, len } => (value.wrapping_sub(min) < len).then(search).flatten(),
            Strategy::Hash { mul, bits, .. } => {
                let h = Strategy::hash(mul, bits, value);
                arms.iter()
                    .find(|a| a.0 == value && Strategy::hash(mul, bits, a.0) == h)
                    .map(|a| a.1)
            }
        }
    }
}

impl Merged {
    /// The reference evaluator: the rank of the best filter matching
    /// `pkt`, a whole frame, or `None`.
    pub fn classify_rank(&self, pkt: &[u8]) -> Option<u32> {
        self.classify_rank_captured(pkt, crate::ir::wire_len(pkt))
    }

    /// [`Merged::classify_rank`] of the first bytes of a packet of
    /// `wire_len` bytes on the wire (a capture's record cut to its
    /// snaplen: see [`Program::matches_captured`]).
    pub fn classify_rank_captured(&self, pkt: &[u8], wire_len: u32) -> Option<u32> {
        let mut best = u32::MAX;
        if let Some(root) = self.root {
            self.eval(root, pkt, wire_len, &mut best);
        }
        (best != u32::MAX).then_some(best)
    }

    /// The owner of the best filter matching `pkt`, a whole frame, or
    /// `None`.
    pub fn classify(&self, pkt: &[u8]) -> Option<u32> {
        self.classify_captured(pkt, crate::ir::wire_len(pkt))
    }

    /// [`Merged::classify`] of the first bytes of a packet of `wire_len`
    /// bytes on the wire.
    pub fn classify_captured(&self, pkt: &[u8], wire_len: u32) -> Option<u32> {
        self.classify_rank_captured(pkt, wire_len)
            .map(|r| self.entries[r as usize].owner)
    }

    /// Evaluates the subtree at `id`: recursion into a dispatch's arm
    /// (one level per atom, at most [`MAX_ATOMS`]), a loop along the wild
    /// chain (one node per distinct key, unbounded).
    fn eval(&self, id: MNodeId, pkt: &[u8], wire_len: u32, best: &mut u32) {
        let mut id = id;
        loop {
            let n = &self.nodes[id as usize];
            if n.min_rank >= *best {
                return;
            }
            for &r in &n.leaves {
                if r >= *best {
                    break;
                }
                let residual = &self.entries[r as usize].residual;
                if residual
                    .as_ref()
                    .is_none_or(|p| p.matches_captured(pkt, wire_len))
                {
                    *best = r;
                    break;
                }
            }
            if let Some(d) = &n.dispatch {
                let child = d.key.field.load(pkt).and_then(|v| d.find(v & d.key.mask));
                if let Some(c) = child {
                    self.eval(c, pkt, wire_len, best);
                }
            }
            match n.wild {
                Some(w) => id = w,
                None => return,
            }
        }
    }

    /// Counts of the trie's nodes and of its dispatches by strategy, for
    /// reports.
    pub fn stats(&self) -> MergeStats {
        let mut s = MergeStats {
            nodes: self.nodes.len(),
            ..MergeStats::default()
        };
        for d in self.nodes.iter().filter_map(|n| n.dispatch.as_ref()) {
            match d.strategy {
                Strategy::Linear => s.linear += 1,
                Strategy::Binary => s.binary += 1,
                Strategy::Table { .. } => s.table += 1,
                Strategy::Hash { .. } => s.hash += 1,
            }
        }
        s.residuals = self.entries.iter().filter(|e| e.residual.is_some()).count();
        s
    }
}

/// The shape of a merged trie.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MergeStats {
    /// Trie nodes.
    pub nodes: usize,
    /// Dispatches by linear compare.
    pub linear: usize,
    /// Dispatches by binary search.
    pub binary: usize,
    /// Dispatches by jump table.
    pub table: usize,
    /// Dispatches by hash.
    pub hash: usize,
    /// Filters with a residual program.
    pub residuals: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A one-port range is an equality for merging: `portrange 4000`
    /// behind an address family and a host merges on its port like
    /// `port 4000`, and means what the program means on every frame,
    /// short ones included.
    #[test]
    fn a_one_port_range_is_an_atom() {
        for (range, port) in [
            ("ip and udp dst portrange 4000", "ip and udp dst port 4000"),
            (
                "tcp dst portrange 4000-4000 and dst host 10.0.0.1",
                "tcp dst port 4000 and dst host 10.0.0.1",
            ),
        ] {
            let p = crate::compile(range).unwrap();
            let a = analyze(&p);
            assert_eq!(a, analyze(&crate::compile(port).unwrap()), "{range}");
            assert!(a.residual.is_none(), "{range}");
            let mut frame = [0u8; 64];
            frame[12..14].copy_from_slice(&[8, 0]);
            frame[14] = 0x45;
            frame[30..34].copy_from_slice(&[10, 0, 0, 1]);
            for (proto, dst) in [(17u8, 4000u16), (6, 4000), (17, 3999), (17, 4001), (6, 80)] {
                frame[23] = proto;
                frame[36..38].copy_from_slice(&dst.to_be_bytes());
                for cut in [64, 38, 37, 36, 24, 14] {
                    let f = &frame[..cut];
                    let merged = a.atoms.iter().all(|t| {
                        t.key
                            .field
                            .load(f)
                            .is_some_and(|x| x & t.key.mask == t.value)
                    });
                    assert_eq!(merged, p.matches(f), "{range}: {proto} {dst} cut {cut}");
                }
            }
        }
    }
}
