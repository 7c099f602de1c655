//! Path expressions to automata (§4.2): the language `start · follows ·
//! exit` of one process of a fast path, as a position automaton.
//!
//! Each occurrence of an element in the expression is a *position*
//! (Glushkov's construction): the automaton's state is the set of positions
//! the events so far may have matched, and a transition on an event goes
//! from a set `D` to the positions that follow some member of `D`, carry the
//! event's statement and whose qualifiers (predicate, partner) hold. Because
//! predicates are only known at run time, the explorer ([`crate::explore`])
//! branches on them; this module only answers the static questions: which
//! positions may follow a state on a statement, and which repetition
//! counters a transition advances.
//!
//! The `exit` element is not only the end of `start · follows · exit`: it
//! may be taken at any listed statement after the start, whatever the state
//! of `follows` ("the fast path is terminated if either the exit element is
//! satisfied or if it deviates from the path specified by the follows
//! field", §3). This is what Figure 6 needs: in Figure 5, hostRequest's path
//! `H0 H1 (H2 H3)*` reaches its exit `#1` right after an `H2` (the reply of
//! size 0 that ends the loop), which `start · follows · exit` read as one
//! regular expression would reject.
//!
//! Fairness (§4.4): every repetition operator (`*`, `+`) has a counter. A
//! follow pair `(p, q)` that starts an iteration of an operator (the first
//! one: `p` outside its body and `q` a first position of it; or another
//! one: `p` a last position of its body and `q` a first one) is annotated
//! with that operator's counter; a transition increments the counters of
//! every pair it uses, so a counter is the number of iterations started.
//! When the same pair arises in several ways the counters of all of them are
//! incremented: counting too often only aborts sooner, which is always
//! legal, while every infinite run of the automaton takes some operator's
//! back edge infinitely often, so no unbounded repetition escapes.
//!
//! Counting the first iteration too makes states that differ only in how
//! the loop was entered behave alike: the explorer identifies automaton
//! states by [`PathAutomaton::signature`], what they can do next, so that
//! `start c; follows c*` has one state after the start and after each `c`.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::{Error, Result};
use crate::ir::{Pos, StmtRef};
use crate::spec::{Element, ProcSpec, Regex};

/// The pseudo-position of the initial state: nothing has happened yet.
pub const INIT: u32 = u32::MAX;

/// One position: an occurrence of an element in `start · follows · exit`.
#[derive(Clone, Debug, PartialEq)]
pub struct Position {
    /// The element (statement, predicate, partner, yield).
    pub elem: Element,
    /// True for the `exit` element: taking it ends the whole fast path.
    pub exit: bool,
}

/// The automaton of one process of a fast path.
#[derive(Clone, Debug, PartialEq)]
pub struct PathAutomaton {
    /// Every position; position `i` is `positions[i]`.
    pub positions: Vec<Position>,
    /// `follow[p]` (and `follow[positions.len()]` for [`INIT`]): each
    /// position that may come next, with the counters (global ids) of the
    /// repetitions that the step starts again.
    follow: Vec<BTreeMap<u32, BTreeSet<u32>>>,
    /// The statements whose execution moves the automaton.
    stmts: BTreeSet<StmtRef>,
    /// The first counter id of this automaton.
    pub counter_base: u32,
    /// Where each repetition operator of this automaton is written (the
    /// position of the first element of its body), one per counter from
    /// `counter_base`.
    pub counters: Vec<Pos>,
}

/// The most work one automaton's construction may do: each step considers
/// one follow pair `(p, q)` (linking it, or annotating it with the counters
/// of the repetitions it enters). A `follows` expression may legitimately
/// need a quadratic number of pairs in its length (`(a | b | c)*` links
/// every element to every other), so the construction is bounded rather
/// than linear: past this budget the specification is refused with
/// [`Error::Spec`] at the element being linked. 250,000 steps take a few
/// milliseconds and about 15 MB.
pub const MAX_WORK: usize = 250_000;

/// What the Glushkov construction knows of a subexpression.
struct Info {
    nullable: bool,
    first: BTreeSet<u32>,
    last: BTreeSet<u32>,
}

struct Builder {
    positions: Vec<Position>,
    follow: Vec<BTreeMap<u32, BTreeSet<u32>>>,
    counter_base: u32,
    counters: Vec<Pos>,
    /// Each repetition: its counter, the first positions of its body and
    /// the range of positions of its body.
    reps: Vec<(u32, BTreeSet<u32>, std::ops::Range<u32>)>,
    /// The steps done so far, against `limit`.
    work: usize,
    limit: usize,
}

fn too_large(pos: Pos, limit: usize) -> Error {
    Error::Spec {
        pos,
        msg: format!(
            "path expression too large: its automaton needs more than {limit} steps \
             to build (too many elements may follow one another; merge repeated \
             or optional parts)"
        ),
    }
}

impl Builder {
    fn position(&mut self, elem: &Element, exit: bool) -> Info {
        let p = self.positions.len() as u32;
        self.positions.push(Position {
            elem: elem.clone(),
            exit,
        });
        self.follow.push(BTreeMap::new());
        Info {
            nullable: false,
            first: BTreeSet::from([p]),
            last: BTreeSet::from([p]),
        }
    }

    /// Counts `steps` steps of work; past the budget, an error at `pos`.
    fn charge(&mut self, steps: usize, pos: Pos) -> Result<()> {
        self.work = self.work.saturating_add(steps);
        if self.work > self.limit {
            return Err(too_large(pos, self.limit));
        }
        Ok(())
    }

    fn link(
        &mut self,
        from: &BTreeSet<u32>,
        to: &BTreeSet<u32>,
        counter: Option<u32>,
    ) -> Result<()> {
        if let Some(&q) = to.first() {
            let pos = self.positions[q as usize].elem.pos;
            self.charge(from.len().saturating_mul(to.len()), pos)?;
        }
        for &p in from {
            for &q in to {
                let set = self.follow[p as usize].entry(q).or_default();
                if let Some(c) = counter {
                    set.insert(c);
                }
            }
        }
        Ok(())
    }

    fn seq(&mut self, parts: Vec<Info>) -> Result<Info> {
        let mut nullable = true;
        let mut first = BTreeSet::new();
        let mut last: BTreeSet<u32> = BTreeSet::new();
        for part in parts {
            self.link(&last, &part.first, None)?;
            if nullable {
                first.extend(part.first.iter().copied());
            }
            if part.nullable {
                last.extend(part.last.iter().copied());
            } else {
                last = part.last;
            }
            nullable &= part.nullable;
        }
        Ok(Info {
            nullable,
            first,
            last,
        })
    }

    fn regex(&mut self, r: &Regex) -> Result<Info> {
        Ok(match r {
            Regex::Elem(e) => self.position(e, false),
            Regex::Seq(parts) => {
                // `r* r*` matches what `r*` does: the copies are dropped, so
                // that stacked repetitions stay linear (with one counter,
                // the path aborts no later than with several).
                let mut infos = Vec::with_capacity(parts.len());
                let mut prev: Option<&Regex> = None;
                for p in parts {
                    if let (Some(q), Regex::Star(_)) = (prev, p)
                        && same(q, p)
                    {
                        continue;
                    }
                    prev = Some(p);
                    infos.push(self.regex(p)?);
                }
                self.seq(infos)?
            }
            Regex::Alt(parts) => {
                let mut info = Info {
                    nullable: parts.is_empty(),
                    first: BTreeSet::new(),
                    last: BTreeSet::new(),
                };
                for p in parts {
                    let i = self.regex(p)?;
                    info.nullable |= i.nullable;
                    info.first.extend(i.first);
                    info.last.extend(i.last);
                }
                info
            }
            Regex::Star(body) | Regex::Plus(body) => {
                let c = self.counter_base + self.counters.len() as u32;
                self.counters.push(first_pos(body));
                let from = self.positions.len() as u32;
                let mut i = self.regex(body)?;
                self.link(&i.last, &i.first, Some(c))?;
                self.reps
                    .push((c, i.first.clone(), from..self.positions.len() as u32));
                if matches!(r, Regex::Star(_)) {
                    i.nullable = true;
                }
                i
            }
            Regex::Opt(body) => {
                let mut i = self.regex(body)?;
                i.nullable = true;
                i
            }
        })
    }
}

/// True when `a` and `b` are the same expression, wherever written.
fn same(a: &Regex, b: &Regex) -> bool {
    fn elem(a: &Element, b: &Element) -> bool {
        a.stmt == b.stmt && a.pred == b.pred && a.partner == b.partner && a.yield_to == b.yield_to
    }
    fn all(a: &[Regex], b: &[Regex]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same(x, y))
    }
    match (a, b) {
        (Regex::Elem(x), Regex::Elem(y)) => elem(x, y),
        (Regex::Seq(x), Regex::Seq(y)) | (Regex::Alt(x), Regex::Alt(y)) => all(x, y),
        (Regex::Star(x), Regex::Star(y))
        | (Regex::Plus(x), Regex::Plus(y))
        | (Regex::Opt(x), Regex::Opt(y)) => same(x, y),
        _ => false,
    }
}

/// The position of the first element written in `r` (for messages).
fn first_pos(r: &Regex) -> Pos {
    match r {
        Regex::Elem(e) => e.pos,
        Regex::Seq(v) | Regex::Alt(v) => v.first().map(first_pos).unwrap_or_default(),
        Regex::Star(b) | Regex::Plus(b) | Regex::Opt(b) => first_pos(b),
    }
}

impl PathAutomaton {
    /// Builds the automaton of `start · follows · exit` for one process;
    /// its repetition counters are numbered from `counter_base`. Fails with
    /// [`Error::Spec`] when the construction would take more than
    /// [`MAX_WORK`] steps.
    pub fn new(spec: &ProcSpec, counter_base: u32) -> Result<PathAutomaton> {
        Self::with_limit(spec, counter_base, MAX_WORK)
    }

    /// [`PathAutomaton::new`] with another work budget.
    pub fn with_limit(spec: &ProcSpec, counter_base: u32, limit: usize) -> Result<PathAutomaton> {
        let mut b = Builder {
            positions: Vec::new(),
            follow: Vec::new(),
            counter_base,
            counters: Vec::new(),
            reps: Vec::new(),
            work: 0,
            limit,
        };
        let mut parts = vec![b.position(&spec.start, false)];
        if let Some(f) = &spec.follows {
            parts.push(b.regex(f)?);
        }
        let whole = b.seq(parts)?;
        if let Some(x) = &spec.exit {
            // The exit may end the path after any event from the start on
            // (see the module documentation).
            let before: BTreeSet<u32> = (0..b.positions.len() as u32).collect();
            let x = b.position(x, true);
            b.link(&before, &x.first, None)?;
        }
        // The initial pseudo-position goes last in `follow`.
        let mut init = BTreeMap::new();
        for q in whole.first {
            init.insert(q, BTreeSet::new());
        }
        b.follow.push(init);
        // Entering a repetition from outside its body starts its first
        // iteration. Each pair is looked at once, with the repetitions whose
        // body it may enter (at most the nesting depth of them).
        let init_index = b.positions.len() as u32;
        let mut entering: Vec<Vec<usize>> = vec![Vec::new(); b.positions.len()];
        for (r, (_, first, _)) in b.reps.iter().enumerate() {
            for &q in first {
                entering[q as usize].push(r);
            }
        }
        let pos = spec.follows.as_ref().map_or(spec.start.pos, first_pos);
        let mut steps = 0usize;
        for f in &b.follow {
            for q in f.keys() {
                steps = steps.saturating_add(entering[*q as usize].len());
            }
        }
        b.charge(steps, pos)?;
        for (p, f) in b.follow.iter_mut().enumerate() {
            let p = p as u32;
            for (q, cs) in f.iter_mut() {
                for &r in &entering[*q as usize] {
                    let (c, _, body) = &b.reps[r];
                    if p == init_index || !body.contains(&p) {
                        cs.insert(*c);
                    }
                }
            }
        }
        let mut stmts: BTreeSet<StmtRef> = spec.stmts.iter().copied().collect();
        stmts.extend(b.positions.iter().map(|p| p.elem.stmt));
        Ok(PathAutomaton {
            positions: b.positions,
            follow: b.follow,
            stmts,
            counter_base,
            counters: b.counters,
        })
    }

    /// The initial state.
    pub fn initial() -> Vec<u32> {
        vec![INIT]
    }

    /// How many repetition counters this automaton uses.
    pub fn counter_count(&self) -> u32 {
        self.counters.len() as u32
    }

    /// True when `stmt` is listed: its execution moves the automaton.
    pub fn listed(&self, stmt: StmtRef) -> bool {
        self.stmts.contains(&stmt)
    }

    fn follows(&self, p: u32) -> &BTreeMap<u32, BTreeSet<u32>> {
        let i = if p == INIT {
            self.positions.len()
        } else {
            p as usize
        };
        &self.follow[i]
    }

    /// The positions that may come next from `state` on `stmt` (in position
    /// order), exit positions included.
    pub fn candidates(&self, state: &[u32], stmt: StmtRef) -> Vec<u32> {
        let mut out = BTreeSet::new();
        for &p in state {
            for &q in self.follows(p).keys() {
                if self.positions[q as usize].elem.stmt == stmt {
                    out.insert(q);
                }
            }
        }
        out.into_iter().collect()
    }

    /// The exit positions among the candidates from `state` on `stmt`.
    pub fn exit_candidates(&self, state: &[u32], stmt: StmtRef) -> Vec<u32> {
        self.candidates(state, stmt)
            .into_iter()
            .filter(|&q| self.positions[q as usize].exit)
            .collect()
    }

    /// The non-exit positions among the candidates from `state` on `stmt`:
    /// the elements the statement's execution may match.
    pub fn step_candidates(&self, state: &[u32], stmt: StmtRef) -> Vec<u32> {
        self.candidates(state, stmt)
            .into_iter()
            .filter(|&q| !self.positions[q as usize].exit)
            .collect()
    }

    /// What state `state` can do next: each position that may follow it,
    /// with the counters the step to it increments. Two states with the
    /// same signature have the same candidates, counters and successors.
    pub fn signature(&self, state: &[u32]) -> BTreeMap<u32, BTreeSet<u32>> {
        let mut out: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
        for &p in state {
            for (q, cs) in self.follows(p) {
                out.entry(*q).or_default().extend(cs.iter().copied());
            }
        }
        out
    }

    /// The counters (global ids, ascending) that the transition from `from`
    /// to the matched positions `to` increments.
    pub fn counters_between(&self, from: &[u32], to: &[u32]) -> Vec<u32> {
        let mut out = BTreeSet::new();
        for &p in from {
            let f = self.follows(p);
            for q in to {
                if let Some(cs) = f.get(q) {
                    out.extend(cs.iter().copied());
                }
            }
        }
        out.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{Element, ProcSpec, Regex};

    fn el(pc: u32) -> Element {
        Element {
            stmt: StmtRef { pc, arm: None },
            pred: None,
            partner: None,
            yield_to: None,
            pos: Pos { line: 1, col: pc },
        }
    }

    fn s(pc: u32) -> StmtRef {
        StmtRef { pc, arm: None }
    }

    fn spec(start: u32, follows: Option<Regex>, exit: Option<u32>) -> ProcSpec {
        ProcSpec {
            proc: 0,
            stmts: vec![],
            start: el(start),
            follows,
            exit: exit.map(el),
            pos: Pos::default(),
        }
    }

    /// Figure 5's hostRequest: H0 · H1 (H2 H3)* · #1.
    #[test]
    fn figure5_host_request() {
        let (h0, h1, h2, h3, x) = (0, 1, 2, 3, 9);
        let f = Regex::Seq(vec![
            Regex::Elem(el(h1)),
            Regex::Star(Box::new(Regex::Seq(vec![
                Regex::Elem(el(h2)),
                Regex::Elem(el(h3)),
            ]))),
        ]);
        let a = PathAutomaton::new(&spec(h0, Some(f), Some(x)), 5).unwrap();
        assert_eq!(a.counter_count(), 1);
        assert!(a.listed(s(h2)) && !a.listed(s(7)));
        let init = PathAutomaton::initial();
        // Only the start element can come first; the exit cannot.
        assert_eq!(a.step_candidates(&init, s(h0)), vec![0]);
        assert!(a.candidates(&init, s(h1)).is_empty());
        assert!(a.candidates(&init, s(x)).is_empty());
        // After H0 only H1.
        assert_eq!(a.step_candidates(&[0], s(h1)), vec![1]);
        assert!(a.candidates(&[0], s(h2)).is_empty());
        // After H1: H2 or the exit.
        assert_eq!(a.step_candidates(&[1], s(h2)), vec![2]);
        assert_eq!(a.exit_candidates(&[1], s(x)), vec![4]);
        assert!(a.step_candidates(&[1], s(h3)).is_empty());
        // H2 H3 H2: each H2 starts an iteration (counter 5).
        assert_eq!(a.step_candidates(&[2], s(h3)), vec![3]);
        assert_eq!(a.counters_between(&[1], &[2]), vec![5]);
        assert_eq!(a.counters_between(&[2], &[3]), Vec::<u32>::new());
        assert_eq!(a.step_candidates(&[3], s(h2)), vec![2]);
        assert_eq!(a.counters_between(&[3], &[2]), vec![5]);
        assert_eq!(a.exit_candidates(&[3], s(x)), vec![4]);
        // The exit may also come in the middle of an iteration (Figure 6:
        // the last reply, H2 of size 0, is followed by #1).
        assert_eq!(a.exit_candidates(&[2], s(x)), vec![4]);
        assert_eq!(a.exit_candidates(&[0], s(x)), vec![4]);
    }

    /// Nested and alternative repetitions each get a counter; a pair that
    /// restarts both increments both.
    #[test]
    fn nested_repetitions() {
        // start · (a | b+)* with a = 1, b = 2
        let f = Regex::Star(Box::new(Regex::Alt(vec![
            Regex::Elem(el(1)),
            Regex::Plus(Box::new(Regex::Elem(el(2)))),
        ])));
        let a = PathAutomaton::new(&spec(0, Some(f), None), 0).unwrap();
        assert_eq!(a.counter_count(), 2);
        // positions: 0 start, 1 a, 2 b; counter 0 is the outer `*`, 1 the `+`.
        assert_eq!(a.counters_between(&[0], &[1]), vec![0]);
        assert_eq!(a.counters_between(&[0], &[2]), vec![0, 1]);
        assert_eq!(a.counters_between(&[1], &[1]), vec![0]);
        assert_eq!(a.counters_between(&[2], &[2]), vec![0, 1]);
        assert_eq!(a.counters_between(&[2], &[1]), vec![0]);
        assert_eq!(a.counters_between(&[1], &[2]), vec![0, 1]);
        // After the start and after any event the state can do the same.
        assert_eq!(a.signature(&[0]), a.signature(&[1]));
        assert_eq!(a.signature(&[1]), a.signature(&[2]));
        assert_ne!(a.signature(&PathAutomaton::initial()), a.signature(&[0]));
        // Several positions of one statement are all candidates.
        let g = Regex::Alt(vec![
            Regex::Elem(el(1)),
            Regex::Seq(vec![Regex::Elem(el(1)), Regex::Elem(el(3))]),
        ]);
        let b = PathAutomaton::new(&spec(0, Some(g), None), 0).unwrap();
        assert_eq!(b.step_candidates(&[0], s(1)), vec![1, 2]);
        assert_eq!(b.step_candidates(&[1, 2], s(3)), vec![3]);
        assert!(b.step_candidates(&[1], s(3)).is_empty());
        // An inner repetition does not count as an iteration of the outer
        // one unless the outer body starts again: (a* b)* with a = 1, b = 2.
        let h = Regex::Star(Box::new(Regex::Seq(vec![
            Regex::Star(Box::new(Regex::Elem(el(1)))),
            Regex::Elem(el(2)),
        ])));
        let c = PathAutomaton::new(&spec(0, Some(h), None), 0).unwrap();
        // counter 0: the outer `*`; counter 1: `a*`.
        assert_eq!(c.counters_between(&[1], &[2]), Vec::<u32>::new());
        assert_eq!(c.counters_between(&[1], &[1]), vec![1]);
        assert_eq!(c.counters_between(&[2], &[1]), vec![0, 1]);
        assert_eq!(c.counters_between(&[2], &[2]), vec![0]);
        assert_eq!(c.counters_between(&[0], &[2]), vec![0]);
    }

    /// `?`, `+` and an exit that may directly follow the start.
    #[test]
    fn optional_and_plus() {
        let f = Regex::Seq(vec![
            Regex::Opt(Box::new(Regex::Elem(el(1)))),
            Regex::Plus(Box::new(Regex::Elem(el(2)))),
        ]);
        let a = PathAutomaton::new(&spec(0, Some(f), Some(3)), 0).unwrap();
        assert_eq!(a.step_candidates(&[0], s(1)), vec![1]);
        assert_eq!(a.step_candidates(&[0], s(2)), vec![2]);
        // The exit can be taken from every state but the initial one.
        assert!(
            a.exit_candidates(&PathAutomaton::initial(), s(3))
                .is_empty()
        );
        assert_eq!(a.exit_candidates(&[0], s(3)), vec![3]);
        assert_eq!(a.exit_candidates(&[1], s(3)), vec![3]);
        assert_eq!(a.exit_candidates(&[2], s(3)), vec![3]);
        // Exiting counts no repetition.
        assert!(a.counters_between(&[2], &[3]).is_empty());
        // Without follows, the exit directly follows the start.
        let b = PathAutomaton::new(&spec(0, None, Some(0)), 0).unwrap();
        assert_eq!(b.exit_candidates(&[0], s(0)), vec![1]);
        assert!(b.step_candidates(&[0], s(0)).is_empty());
        assert_eq!(b.counter_count(), 0);
    }

    /// Stacked repetitions of one element (`#1* #1* ... #1*`, a spec of a
    /// few kilobytes) once took cubic time in their number: they are one
    /// repetition now, with one position and one counter.
    #[test]
    fn stacked_repetitions_of_one_element_stay_small() {
        let f = Regex::Seq(
            (0..2000)
                .map(|_| Regex::Star(Box::new(Regex::Elem(el(1)))))
                .collect(),
        );
        // A budget of a few steps a copy: the old construction needed
        // millions (every copy followed by every later one).
        let a = PathAutomaton::with_limit(&spec(0, Some(f), Some(2)), 0, 100).unwrap();
        assert_eq!(a.positions.len(), 3);
        assert_eq!(a.counter_count(), 1);
        assert_eq!(a.step_candidates(&[0], s(1)), vec![1]);
        assert_eq!(a.step_candidates(&[1], s(1)), vec![1]);
        assert_eq!(a.counters_between(&[1], &[1]), vec![0]);
        assert_eq!(a.exit_candidates(&[1], s(2)), vec![2]);
        // Only equal neighbours merge: `a* b* a*` keeps three.
        let g = Regex::Seq(vec![
            Regex::Star(Box::new(Regex::Elem(el(1)))),
            Regex::Star(Box::new(Regex::Elem(el(3)))),
            Regex::Star(Box::new(Regex::Elem(el(1)))),
        ]);
        let b = PathAutomaton::new(&spec(0, Some(g), None), 0).unwrap();
        assert_eq!((b.positions.len(), b.counter_count()), (4, 3));
    }

    /// A `follows` whose automaton is quadratic in its length
    /// (`#1* #3* #1* #3* ...`: every element may follow every earlier one)
    /// is refused with a specification error at the element being linked
    /// once the construction has done [`MAX_WORK`] steps.
    #[test]
    fn a_quadratic_automaton_is_refused_past_the_work_budget() {
        let alternating = |n: u32| {
            Regex::Seq(
                (0..n)
                    .map(|i| {
                        let mut e = el(1 + 2 * (i % 2));
                        e.pos = Pos {
                            line: 2,
                            col: 1 + i,
                        };
                        Regex::Star(Box::new(Regex::Elem(e)))
                    })
                    .collect(),
            )
        };
        // 400 copies: about 80,000 pairs, within the budget.
        let a = PathAutomaton::new(&spec(0, Some(alternating(400)), Some(2)), 0).unwrap();
        assert_eq!(a.counter_count(), 400);
        // 2,000 copies need about two million steps.
        let e = PathAutomaton::new(&spec(0, Some(alternating(2000)), Some(2)), 0).unwrap_err();
        let Error::Spec { pos, msg } = &e else {
            panic!("{e:?}")
        };
        assert_eq!(pos.line, 2);
        assert!(pos.col > 400 && pos.col <= 2000, "{pos:?}");
        assert!(
            msg.contains("too large") && msg.contains(&MAX_WORK.to_string()),
            "{msg}"
        );
        // A smaller budget stops sooner.
        let e =
            PathAutomaton::with_limit(&spec(0, Some(alternating(400)), None), 0, 1000).unwrap_err();
        assert!(
            matches!(e, Error::Spec { pos, .. } if pos.col <= 100),
            "{e:?}"
        );
    }
}
