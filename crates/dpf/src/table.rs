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
//! The generated code is published through the thread-shared code cache
//! (`codecache`, after Bruening et al., CGO 2006): the table's classifier
//! is the cache entry under the table's key, and each install or removal
//! publishes a new version of it, which retires the old one. A thread
//! classifies through a [`Reader`], a thread registered with the cache:
//! its lookup takes no lock, a packet sees the old classifier or the new
//! one and never a mix, and the old code is freed as soon as every
//! registered thread not flagged out has passed a synchronization point
//! (the next packet or batch), never while a thread may still run it.
//!
//! Beside the code, the table publishes the merged structure itself
//! through an atomic pointer swap (`arc-swap`). The reference evaluator
//! reads it, and a reader that finds no code under the key (the cache
//! evicted it for capacity) classifies with it rather than lose the
//! packet.

use crate::codegen;
use crate::error::Error;
use crate::ir::Program;
use crate::merge::{Analysis, Candidate, Merged, analyze, merge};
use arc_swap::ArcSwap;
use codecache::{CodeCache, Config};
use std::collections::BTreeMap;
use std::sync::Arc;
use vcode::Func;

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

/// A filter parsed, lowered and analyzed, ready to install: the part of
/// an install that depends on the filter alone, which a caller can do
/// before taking any lock it installs under ([`Table::prepare`],
/// [`Table::install_prepared`]).
#[derive(Clone, Debug)]
pub struct Prepared {
    source: String,
    program: Program,
    analysis: Analysis,
}

impl Prepared {
    /// The filter's decision graph.
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// The filter's text.
    pub fn source(&self) -> &str {
        &self.source
    }
}

/// A compiled table: the merged structure, the version of the code
/// published from it, and the reference evaluator.
#[derive(Debug)]
pub struct Classifier {
    merged: Merged,
    version: u64,
    /// How many filters it was compiled from (the merged structure has an
    /// entry per alternative of a split filter).
    filters: usize,
}

/// The native classifier's signature: the packet's bytes, how many, and
/// its length on the wire ([`crate::codegen::emit`]).
type Entry = extern "C" fn(*const u8, u64, u64) -> u64;

impl Classifier {
    /// The owner of the highest-priority filter matching `pkt`, a whole
    /// frame, by the reference evaluator of the merged structure.
    pub fn classify_reference(&self, pkt: &[u8]) -> Option<u32> {
        self.merged.classify(pkt)
    }

    /// [`Classifier::classify_reference`] of the first bytes of a packet of
    /// `wire_len` bytes on the wire (a capture's record cut to its
    /// snaplen: [`crate::ir::Program::matches_captured`]).
    pub fn classify_reference_captured(&self, pkt: &[u8], wire_len: u32) -> Option<u32> {
        self.merged.classify_captured(pkt, wire_len)
    }

    /// The merged decision structure.
    pub fn merged(&self) -> &Merged {
        &self.merged
    }

    /// The version of the code published from it (0: none, an empty table).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// How many filters it was compiled from.
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
/// let mut reader = t.reader(); // on each classifying thread
/// assert_eq!(reader.classify(&pkt), Some(7));
/// t.remove(web)?;
/// assert_eq!(reader.classify(&pkt), Some(9));
/// # Ok::<(), dpf::Error>(())
/// ```
pub struct Table {
    filters: BTreeMap<FilterId, Installed>,
    next: u64,
    cache: Arc<CodeCache>,
    key: u64,
    published: Arc<ArcSwap<Classifier>>,
    func: Func,
}

impl Default for Table {
    fn default() -> Self {
        Self::new()
    }
}

impl Table {
    /// An empty table with a code cache of its own.
    pub fn new() -> Self {
        Table::with_cache(Arc::new(CodeCache::new(Config::default())), 0)
    }

    /// An empty table publishing its classifier in `cache` under `key`
    /// (the engine's cache, shared with other generated code). Whatever is
    /// under `key` is retired.
    pub fn with_cache(cache: Arc<CodeCache>, key: u64) -> Self {
        cache.retire(key);
        let empty = Classifier {
            merged: merge(&[]),
            version: 0,
            filters: 0,
        };
        Table {
            filters: BTreeMap::new(),
            next: 0,
            cache,
            key,
            published: Arc::new(ArcSwap::from_pointee(empty)),
            func: Func::new(),
        }
    }

    /// The code cache the classifier lives in.
    pub fn cache(&self) -> &Arc<CodeCache> {
        &self.cache
    }

    /// Installs the filter `src` (pcap-filter syntax) for `owner`, with
    /// `priority` (higher wins; among equal priorities, the earlier
    /// install). On error the table is unchanged.
    pub fn install(&mut self, src: &str, owner: u32, priority: i32) -> Result<FilterId, Error> {
        self.install_prepared(Self::prepare(src)?, owner, priority)
    }

    /// Parses, lowers and analyzes `src` without touching any table:
    /// everything an install does that depends on the filter alone.
    pub fn prepare(src: &str) -> Result<Prepared, Error> {
        let program = crate::compile(src)?;
        let analysis = analyze(&program);
        Ok(Prepared {
            source: src.to_string(),
            program,
            analysis,
        })
    }

    /// Installs a filter [`Table::prepare`]d earlier: only the table is
    /// merged and its code generated and published. On error the table is
    /// unchanged.
    pub fn install_prepared(
        &mut self,
        filter: Prepared,
        owner: u32,
        priority: i32,
    ) -> Result<FilterId, Error> {
        self.insert(Installed {
            owner,
            priority,
            source: Some(filter.source),
            analysis: filter.analysis,
        })
    }

    /// Installs several filters (source, owner, priority) with one
    /// recompilation, for loading a whole table. Either all are installed
    /// or, on the first error, none (a filter that does not compile is
    /// named by [`Error::InBatch`]); the ids come back in order.
    pub fn install_many<'s>(
        &mut self,
        filters: impl IntoIterator<Item = (&'s str, u32, i32)>,
    ) -> Result<Vec<FilterId>, Error> {
        let mut staged = Vec::new();
        for (index, (src, owner, priority)) in filters.into_iter().enumerate() {
            let program = crate::compile(src).map_err(|e| Error::InBatch {
                index,
                error: Box::new(e),
            })?;
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
        self.insert(Installed {
            owner,
            priority,
            source,
            analysis: analyze(&program),
        })
    }

    fn insert(&mut self, installed: Installed) -> Result<FilterId, Error> {
        let id = FilterId(self.next);
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
        // A filter split into alternatives is one candidate each, for its
        // owner, at adjacent ranks: the best of them that matches is the
        // filter's match, in the filter's place among the others.
        let cands: Vec<Candidate<'_>> = order
            .iter()
            .flat_map(|(_, f)| {
                f.analysis.parts().iter().map(|analysis| Candidate {
                    owner: f.owner,
                    analysis,
                })
            })
            .collect();
        let merged = merge(&cands);
        let filters = order.len();
        let version = self.published.load().version + 1;
        if merged.root.is_some() {
            let func = &mut self.func;
            self.cache
                .publish(self.key, version, |e: &mut codecache::Emit<'_>| {
                    codegen::emit(func, &merged)?;
                    func.end_in(e.mem())
                })
                .map_err(|e| match e {
                    codecache::Error::Generate(e) => Error::Codegen(e),
                    other => Error::Publish(other.to_string()),
                })?;
        } else {
            self.cache.retire(self.key);
        }
        self.published.store(Arc::new(Classifier {
            merged,
            version,
            filters,
        }));
        Ok(())
    }

    /// The classifier now published (its merged structure and reference
    /// evaluator).
    pub fn classifier(&self) -> Arc<Classifier> {
        self.published.load_full()
    }

    /// A handle a thread classifies through: a thread registered with the
    /// code cache. It always sees the classifier most recently published.
    /// While it exists it takes part in deletion: a thread that idles or
    /// blocks should do so in [`Reader::blocking`].
    pub fn reader(&self) -> Reader {
        Reader {
            thread: self.cache.register(),
            key: self.key,
            published: Arc::clone(&self.published),
            checked: None,
            memo: codecache::Memo::default(),
        }
    }

    /// The published code's size in bytes and its disassembly, `None` for
    /// an empty table.
    pub fn code_listing(&self) -> Option<(usize, String)> {
        let mut me = self.cache.register();
        let scope = me.enter();
        scope
            .lookup(self.key)
            .map(|e| (e.code().len(), e.code().disassemble()))
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

impl Drop for Table {
    /// Retires the table's classifier from the cache.
    fn drop(&mut self) {
        self.cache.retire(self.key);
    }
}

/// A thread's handle on a table's published classifier.
pub struct Reader {
    thread: codecache::Thread,
    key: u64,
    published: Arc<ArcSwap<Classifier>>,
    /// The entry id whose code `entry` was checked from (`as_fn`), so the
    /// signature is checked once per publication, not once per packet.
    checked: Option<(u64, Entry)>,
    /// The last look-up of the table's key, which the next one reuses
    /// while nothing has been retired from the cache since (no probe of
    /// the cache's table per packet).
    memo: codecache::Memo,
}

impl Reader {
    /// The owner of the highest-priority filter matching `pkt`, a whole
    /// frame, by the classifier published when the call starts.
    #[inline]
    pub fn classify(&mut self, pkt: &[u8]) -> Option<u32> {
        self.batch(|b| b.classify(pkt))
    }

    /// [`Reader::classify`] of the first bytes of a packet of `wire_len`
    /// bytes on the wire (a capture's record cut to its snaplen:
    /// [`crate::ir::Program::matches_captured`]).
    #[inline]
    pub fn classify_captured(&mut self, pkt: &[u8], wire_len: u32) -> Option<u32> {
        self.batch(|b| b.classify_captured(pkt, wire_len))
    }

    /// Runs `f` with a [`Batch`]: one look-up of the classifier for many
    /// packets, which then all see the same table. Do not block in `f`.
    pub fn batch<R>(&mut self, f: impl FnOnce(&Batch<'_>) -> R) -> R {
        let scope = self.thread.enter();
        let checked = &mut self.checked;
        let native = scope
            .lookup_memo(self.key, &mut self.memo)
            .and_then(|e| match *checked {
                Some((id, f)) if id == e.id() => Some(f),
                _ => {
                    // SAFETY: the code under the table's key was generated by
                    // `codegen::emit`, a function of signature `(*const u8, u64,
                    // u64) -> u64` (its `lambda` is "%p%ul%ul" and it returns a `ul`),
                    // which `as_fn` checks again against the recorded
                    // signature. The pointer is used only inside a scope in
                    // which the lookup found this entry (same id: ids are never
                    // reused), so the code is mapped while it runs.
                    let f = unsafe { e.code().as_fn::<Entry>() }.ok()?;
                    *checked = Some((e.id(), f));
                    Some(f)
                }
            });
        let fallback = native.is_none().then(|| self.published.load_full());
        f(&Batch {
            native,
            fallback,
            _scope: std::marker::PhantomData,
        })
    }

    /// Runs `f` flagged out of the code cache (its "system-call flag"):
    /// for a blocking call, a wait or an idle poll, so that the thread
    /// never delays the freeing of replaced classifiers.
    pub fn blocking<R>(&mut self, f: impl FnOnce() -> R) -> R {
        self.thread.blocking(f)
    }
}

/// One look-up of a table's classifier, for a batch of packets.
pub struct Batch<'s> {
    native: Option<Entry>,
    fallback: Option<Arc<Classifier>>,
    _scope: std::marker::PhantomData<&'s ()>,
}

impl Batch<'_> {
    /// The owner of the highest-priority filter matching `pkt`, a whole
    /// frame.
    #[inline]
    pub fn classify(&self, pkt: &[u8]) -> Option<u32> {
        self.classify_captured(pkt, crate::ir::wire_len(pkt))
    }

    /// [`Batch::classify`] of the first bytes of a packet of `wire_len`
    /// bytes on the wire (a capture's record cut to its snaplen:
    /// [`crate::ir::Program::matches_captured`]).
    #[inline]
    pub fn classify_captured(&self, pkt: &[u8], wire_len: u32) -> Option<u32> {
        match self.native {
            Some(f) => {
                // The generated code reads only bytes [0, len) of `pkt`:
                // every load is preceded by a bounds check against `len` on
                // its path. `wire_len` is only a value (`len`).
                codegen::owner(f(pkt.as_ptr(), pkt.len() as u64, u64::from(wire_len)))
            }
            // No code: an empty table, or code evicted for capacity.
            None => self
                .fallback
                .as_ref()
                .and_then(|c| c.classify_reference_captured(pkt, wire_len)),
        }
    }
}
