//! The filter table: filters installed and removed at run time, each with
//! an owner and a priority, and the classifier compiled from all of them,
//! published atomically to the threads that classify.
//!
//! An install parses, lowers and analyzes the one new filter (the part of
//! the work that is per filter, done once and kept), then merges the whole
//! table and generates its code, and publishes the result. A filter that
//! fails to parse, or a table whose code cannot be generated, leaves the
//! table and the published classifier exactly as they were.
//!
//! Publication is an atomic pointer swap (`arc-swap`): a thread
//! classifying at that moment holds the old classifier, whose code stays
//! mapped until the last such thread lets go, and its next packet sees the
//! new one; no thread ever sees a mix. The thread-shared code cache
//! (`codecache`) takes this role over when the engine runs with it.

use crate::codegen;
use crate::error::Error;
use crate::ir::Program;
use crate::merge::{Analysis, Candidate, Merged, analyze, merge};
use arc_swap::ArcSwap;
use std::collections::BTreeMap;
use std::sync::Arc;
use vcode::Func;
use vcode::x86_64::Code;

/// A handle on an installed filter, for removing it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FilterId(pub u64);

/// One installed filter.
#[derive(Debug)]
struct Installed {
    owner: u32,
    priority: i32,
    source: Option<String>,
    analysis: Analysis,
}

/// A compiled table: the merged structure and its native code.
#[derive(Debug)]
pub struct Classifier {
    merged: Merged,
    code: Option<Code>,
    filters: usize,
}

/// The native classifier's signature.
type Entry = extern "C" fn(*const u8, u64) -> u64;

impl Classifier {
    fn compile(merged: Merged, func: &mut Func) -> Result<Self, Error> {
        let code = match merged.root {
            Some(_) => Some(codegen::generate(func, &merged)?),
            None => None,
        };
        let filters = merged.entries.len();
        Ok(Classifier {
            merged,
            code,
            filters,
        })
    }

    /// The owner of the highest-priority filter matching `pkt`, by the
    /// native code.
    #[inline]
    pub fn classify(&self, pkt: &[u8]) -> Option<u32> {
        let code = self.code.as_ref()?;
        // SAFETY: `codegen::generate` emits a function of signature
        // `(*const u8, u64) -> u64` (its `lambda` is "%p%ul" and it returns
        // a `ul`), checked again by `as_fn` against the recorded signature.
        let f = unsafe { code.as_fn::<Entry>() }.ok()?;
        // The generated code reads only bytes [0, len) of `pkt`: every load
        // is preceded by a bounds check against `len` on its path.
        let owner = f(pkt.as_ptr(), pkt.len() as u64);
        (owner != u64::MAX).then_some(owner as u32)
    }

    /// The same answer by the reference evaluator of the merged structure.
    pub fn classify_reference(&self, pkt: &[u8]) -> Option<u32> {
        self.merged.classify(pkt)
    }

    /// The merged decision structure.
    pub fn merged(&self) -> &Merged {
        &self.merged
    }

    /// The native code, `None` for an empty table.
    pub fn code(&self) -> Option<&Code> {
        self.code.as_ref()
    }

    /// How many filters the classifier was compiled from.
    pub fn len(&self) -> usize {
        self.filters
    }

    /// Whether it was compiled from no filter.
    pub fn is_empty(&self) -> bool {
        self.filters == 0
    }
}

/// A table of filters and its published classifier.
///
/// ```
/// let mut t = dpf::Table::new();
/// let web = t.install("tcp dst port 80", 7, 0)?;
/// t.install("tcp", 9, -1)?;
/// let mut pkt = vec![0u8; 54];
/// pkt[12] = 0x08; // IPv4
/// pkt[14] = 0x45;
/// pkt[23] = 6; // TCP
/// pkt[37] = 80; // destination port 80
/// assert_eq!(t.classify(&pkt), Some(7));
/// t.remove(web)?;
/// assert_eq!(t.classify(&pkt), Some(9));
/// # Ok::<(), dpf::Error>(())
/// ```
pub struct Table {
    filters: BTreeMap<FilterId, Installed>,
    next: u64,
    published: Arc<ArcSwap<Classifier>>,
    func: Func,
}

impl Default for Table {
    fn default() -> Self {
        Self::new()
    }
}

impl Table {
    /// An empty table.
    pub fn new() -> Self {
        let empty = Classifier {
            merged: merge(&[]),
            code: None,
            filters: 0,
        };
        Table {
            filters: BTreeMap::new(),
            next: 0,
            published: Arc::new(ArcSwap::from_pointee(empty)),
            func: Func::new(),
        }
    }

    /// Installs the filter `src` (pcap-filter syntax) for `owner`, with
    /// `priority` (higher wins; among equal priorities, the earlier
    /// install). On error the table is unchanged.
    pub fn install(&mut self, src: &str, owner: u32, priority: i32) -> Result<FilterId, Error> {
        let program = crate::compile(src)?;
        self.add(program, Some(src.to_string()), owner, priority)
    }

    /// Installs several filters (source, owner, priority) with one
    /// recompilation, for loading a whole table. Either all are installed
    /// or, on the first error, none; the ids come back in order.
    pub fn install_many<'s>(
        &mut self,
        filters: impl IntoIterator<Item = (&'s str, u32, i32)>,
    ) -> Result<Vec<FilterId>, Error> {
        let mut staged = Vec::new();
        for (src, owner, priority) in filters {
            let program = crate::compile(src)?;
            staged.push(Installed {
                owner,
                priority,
                source: Some(src.to_string()),
                analysis: analyze(&program),
            });
        }
        let first = self.next;
        let ids: Vec<FilterId> = (first..first + staged.len() as u64).map(FilterId).collect();
        for (&id, f) in ids.iter().zip(staged) {
            self.filters.insert(id, f);
        }
        if let Err(e) = self.publish() {
            for id in &ids {
                self.filters.remove(id);
            }
            return Err(e);
        }
        self.next += ids.len() as u64;
        Ok(ids)
    }

    /// Installs a filter already lowered to a program.
    pub fn install_program(
        &mut self,
        program: &Program,
        owner: u32,
        priority: i32,
    ) -> Result<FilterId, Error> {
        self.add(program.clone(), None, owner, priority)
    }

    fn add(
        &mut self,
        program: Program,
        source: Option<String>,
        owner: u32,
        priority: i32,
    ) -> Result<FilterId, Error> {
        let id = FilterId(self.next);
        let installed = Installed {
            owner,
            priority,
            source,
            analysis: analyze(&program),
        };
        self.filters.insert(id, installed);
        if let Err(e) = self.publish() {
            self.filters.remove(&id);
            return Err(e);
        }
        self.next += 1;
        Ok(id)
    }

    /// Removes a filter. On error (an unknown id) the table is unchanged.
    pub fn remove(&mut self, id: FilterId) -> Result<(), Error> {
        let removed = self
            .filters
            .remove(&id)
            .ok_or(Error::UnknownFilter { id: id.0 })?;
        if let Err(e) = self.publish() {
            self.filters.insert(id, removed);
            return Err(e);
        }
        Ok(())
    }

    /// Merges the table, generates its code and publishes it.
    fn publish(&mut self) -> Result<(), Error> {
        let mut order: Vec<(&FilterId, &Installed)> = self.filters.iter().collect();
        // Rank order: priority descending, then installation order (ids
        // ascending; the sort is stable over the id-ordered map).
        order.sort_by_key(|(_, f)| std::cmp::Reverse(f.priority));
        let cands: Vec<Candidate<'_>> = order
            .iter()
            .map(|(_, f)| Candidate {
                owner: f.owner,
                analysis: &f.analysis,
            })
            .collect();
        let c = Classifier::compile(merge(&cands), &mut self.func)?;
        self.published.store(Arc::new(c));
        Ok(())
    }

    /// The owner of the highest-priority filter matching `pkt`.
    #[inline]
    pub fn classify(&self, pkt: &[u8]) -> Option<u32> {
        self.published.load().classify(pkt)
    }

    /// The classifier now published.
    pub fn classifier(&self) -> Arc<Classifier> {
        self.published.load_full()
    }

    /// A handle other threads classify through; it always sees the
    /// classifier most recently published.
    pub fn reader(&self) -> Reader {
        Reader {
            published: Arc::clone(&self.published),
        }
    }

    /// The installed filters: id, owner, priority and source text (if
    /// installed from text), in installation order.
    pub fn filters(&self) -> impl Iterator<Item = (FilterId, u32, i32, Option<&str>)> {
        self.filters
            .iter()
            .map(|(&id, f)| (id, f.owner, f.priority, f.source.as_deref()))
    }

    /// The number of installed filters.
    pub fn len(&self) -> usize {
        self.filters.len()
    }

    /// Whether no filter is installed.
    pub fn is_empty(&self) -> bool {
        self.filters.is_empty()
    }
}

/// A thread's handle on a table's published classifier.
#[derive(Clone)]
pub struct Reader {
    published: Arc<ArcSwap<Classifier>>,
}

impl Reader {
    /// The owner of the highest-priority filter matching `pkt`, by the
    /// classifier published when the call starts.
    #[inline]
    pub fn classify(&self, pkt: &[u8]) -> Option<u32> {
        self.published.load().classify(pkt)
    }

    /// Runs `f` with the classifier published now (for a batch of packets,
    /// which then all see the same table).
    pub fn with<R>(&self, f: impl FnOnce(&Classifier) -> R) -> R {
        f(&self.published.load())
    }
}
