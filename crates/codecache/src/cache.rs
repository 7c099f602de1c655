//! The cache: publication, lookup inside scopes, the two-step deletion,
//! capacity, statistics, and the shared and private modes.

use crate::arena::{AllocError, Arena, ArenaStats, CodePage};
use crate::deletion::{DelayHistogram, Guard, Participation, Reclaimer};
use crate::link::{Link, Links};
use crate::table::{Map, Memo, Unlinked};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use vcode::ErrorKind;
use vcode::mem::{ExecBlock, ExecMemory};

/// Whether threads share one cache or each has its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Sharing {
    /// One cache for every thread (the paper's design).
    #[default]
    Shared,
    /// One cache per registered thread: every publication is generated
    /// once per thread, as thread-private code caches do.
    Private,
}

/// How a cache is set up.
#[derive(Clone, Debug)]
pub struct Config {
    /// Bytes of executable memory the cache may map (per cache: in private
    /// mode, per thread).
    pub capacity: usize,
    /// Shared or private.
    pub sharing: Sharing,
    /// Bytes of code per generation: eviction removes the oldest generation
    /// as one batch.
    pub generation_bytes: usize,
    /// Code (in bytes) above which the cache evicts the oldest generation
    /// after a publication, in percent of `capacity`. The rest is headroom
    /// for the delay between asking for space and getting it back: evicted
    /// code is freed only after every running thread's next
    /// synchronization point (paper §9.2, last paragraph).
    pub high_water_percent: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            capacity: 64 << 20,
            sharing: Sharing::Shared,
            generation_bytes: 1 << 20,
            high_water_percent: 75,
        }
    }
}

impl Config {
    /// The default configuration with another capacity (and a generation
    /// size of a sixteenth of it).
    pub fn with_capacity(capacity: usize) -> Config {
        Config {
            capacity,
            generation_bytes: (capacity / 16).max(4096),
            ..Config::default()
        }
    }

    /// The same configuration in private mode.
    pub fn private(self) -> Config {
        Config {
            sharing: Sharing::Private,
            ..self
        }
    }
}

/// What went wrong. `Clone` and `Eq`, like the errors it wraps, so that a
/// client can keep it as the typed source of its own error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The builder failed (including running out of cache memory inside
    /// `end_in`, reported by vcode as a memory error).
    #[error("generating code: {0}")]
    Generate(#[from] vcode::Error),
    /// Cache memory for a link site.
    #[error(transparent)]
    Alloc(#[from] AllocError),
}

/// One published block: the code for a key at one version.
pub struct Entry {
    key: u64,
    version: u64,
    pub(crate) id: u64,
    generation: u64,
    bytes: usize,
    /// Set under the link lock when the entry is unlinked: no site links
    /// to it again.
    pub(crate) unlinked: AtomicBool,
    links: Vec<Link>,
    code: vcode::Code,
}

impl Entry {
    /// The entry's identity: unique among the entries this cache (in
    /// private mode, this thread's cache) ever held, never reused. A caller
    /// may cache what it derived from an entry's code under this id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The key it was published under.
    pub fn key(&self) -> u64 {
        self.key
    }

    /// The version the publisher gave it.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The generation (capacity batch) it belongs to.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The code.
    pub fn code(&self) -> &vcode::Code {
        &self.code
    }

    /// The links the code uses.
    pub fn links(&self) -> &[Link] {
        &self.links
    }

    /// Cache bytes of the code block and its link sites.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// What a builder gets: the cache's memory for `end_in`, and links.
pub struct Emit<'a> {
    core: &'a Core,
    links: Vec<Link>,
}

impl Emit<'_> {
    /// Executable memory from the cache, for [`vcode::Func::end_in`].
    pub fn mem(&self) -> &dyn ExecMemory {
        self.core
    }

    /// A patchable direct jump to the code published under `target` (now
    /// or later); where no code is published under it, calls through the
    /// link go to `fallback` (the address of a function with the same
    /// signature). Returns the address to call. The link belongs to the
    /// block being built.
    pub fn link(&mut self, target: u64, fallback: usize) -> Result<usize, Error> {
        let core = self.core;
        let tramp = core.trampoline()?;
        let l = Link::new(&core.arena, core, &core.links, target, fallback, tramp)?;
        core.building.fetch_add(l.bytes(), Ordering::Relaxed);
        let a = l.addr();
        self.links.push(l);
        Ok(a)
    }
}

#[repr(align(128))]
#[derive(Default)]
struct Counters {
    lookups: AtomicU64,
    hits: AtomicU64,
}

/// The cache state behind one [`CodeCache`] (shared mode) or one thread
/// (private mode).
pub(crate) struct Core {
    cfg: Config,
    pub(crate) arena: Arena,
    pub(crate) table: Map<Entry>,
    rec: Arc<Reclaimer>,
    pub(crate) links: Arc<Links>,
    trampoline: OnceLock<CodePage>,
    /// The building lock (paper §6): held across looking up, building and
    /// adding a block.
    build: Mutex<()>,
    build_contention: AtomicU64,
    /// Bytes allocated by the build in progress (under `build`).
    building: AtomicUsize,
    /// Live entries per generation, and the generation being filled.
    gens: Mutex<Generations>,
    gen_contention: AtomicU64,
    next_id: AtomicU64,
    live_bytes: AtomicUsize,
    evictions: AtomicU64,
    counters: Mutex<Vec<Arc<Counters>>>,
}

#[derive(Default)]
struct Generations {
    current: u64,
    bytes: usize,
    live: BTreeMap<u64, usize>,
}

fn lock_counted<'a, T>(m: &'a Mutex<T>, c: &AtomicU64) -> std::sync::MutexGuard<'a, T> {
    match m.try_lock() {
        Ok(g) => g,
        Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => {
            c.fetch_add(1, Ordering::Relaxed);
            m.lock().unwrap_or_else(|p| p.into_inner())
        }
    }
}

impl Core {
    fn new(cfg: Config) -> Core {
        let rec = Arc::new(Reclaimer::new());
        Core {
            arena: Arena::new(cfg.capacity),
            cfg,
            table: Map::new(rec.clone()),
            rec,
            links: Arc::new(Links::new()),
            trampoline: OnceLock::new(),
            build: Mutex::new(()),
            build_contention: AtomicU64::new(0),
            building: AtomicUsize::new(0),
            gens: Mutex::new(Generations::default()),
            gen_contention: AtomicU64::new(0),
            next_id: AtomicU64::new(1),
            live_bytes: AtomicUsize::new(0),
            evictions: AtomicU64::new(0),
            counters: Mutex::new(Vec::new()),
        }
    }

    fn trampoline(&self) -> Result<usize, AllocError> {
        if let Some(t) = self.trampoline.get() {
            return Ok(t.exec());
        }
        let page = CodePage::new(&crate::link::trampoline_code())?;
        // Another builder may have won the race; then ours is unmapped.
        Ok(self.trampoline.get_or_init(|| page).exec())
    }

    /// Builds an entry for `key` (under the building lock, which the
    /// caller holds), for the caller to publish. `current` is consulted
    /// first (under the lock) by `get_or_build`.
    fn build_entry<F, E>(&self, key: u64, version: u64, build: F) -> Result<Box<Entry>, Error>
    where
        F: FnOnce(&mut Emit<'_>) -> Result<vcode::Code, E>,
        E: Into<Error>,
    {
        self.building.store(0, Ordering::Relaxed);
        let mut emit = Emit {
            core: self,
            links: Vec::new(),
        };
        let code = build(&mut emit).map_err(Into::into)?;
        let bytes = self.building.load(Ordering::Relaxed);
        let generation = {
            let mut g = lock_counted(&self.gens, &self.gen_contention);
            if g.bytes >= self.cfg.generation_bytes {
                g.current += 1;
                g.bytes = 0;
            }
            g.bytes += bytes;
            let cur = g.current;
            *g.live.entry(cur).or_default() += 1;
            cur
        };
        let e = Box::new(Entry {
            key,
            version,
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            generation,
            bytes,
            unlinked: AtomicBool::new(false),
            links: emit.links,
            code,
        });
        self.live_bytes.fetch_add(bytes, Ordering::Relaxed);
        Ok(e)
    }

    fn publish<F, E>(&self, key: u64, version: u64, build: F) -> Result<(), Error>
    where
        F: FnOnce(&mut Emit<'_>) -> Result<vcode::Code, E>,
        E: Into<Error>,
    {
        let r = {
            let _b = lock_counted(&self.build, &self.build_contention);
            self.build_entry(key, version, build).map(|e| {
                if let Some(old) = self.table.insert(key, e) {
                    self.unlink_and_retire(vec![old]);
                }
            })
        };
        self.keep_below_high_water();
        r
    }

    /// Step one (the table removal is done by the caller) and step two of
    /// deletion: unlink, then put the set on the pending list.
    fn unlink_and_retire(&self, set: Vec<Unlinked<Entry>>) {
        if set.is_empty() {
            return;
        }
        let mut bytes = 0;
        {
            let mut g = lock_counted(&self.gens, &self.gen_contention);
            for e in &set {
                self.links.unlink(e);
                bytes += e.bytes;
                if let Some(n) = g.live.get_mut(&e.generation) {
                    *n -= 1;
                    if *n == 0 {
                        g.live.remove(&e.generation);
                    }
                }
            }
        }
        self.live_bytes.fetch_sub(bytes, Ordering::Relaxed);
        Unlinked::retire_set(set, bytes);
    }

    fn retire_keys(&self, keys: &[u64]) -> usize {
        let set: Vec<_> = keys.iter().filter_map(|&k| self.table.remove(k)).collect();
        let n = set.len();
        self.unlink_and_retire(set);
        n
    }

    /// Evicts the oldest generation as one set; returns how many entries.
    fn evict_oldest(&self) -> usize {
        let oldest = {
            let mut g = lock_counted(&self.gens, &self.gen_contention);
            let Some((&oldest, _)) = g.live.iter().next() else {
                return 0;
            };
            if oldest == g.current {
                // New code goes to a new generation from now on.
                g.current += 1;
                g.bytes = 0;
            }
            oldest
        };
        let mut victims = Vec::new();
        self.table.for_each(|k, e| {
            if e.generation == oldest {
                victims.push((k, e.id));
            }
        });
        let set: Vec<_> = victims
            .into_iter()
            .filter_map(|(k, id)| self.table.remove_if(k, |e| e.id == id))
            .collect();
        let n = set.len();
        self.evictions.fetch_add(n as u64, Ordering::Relaxed);
        self.unlink_and_retire(set);
        n
    }

    fn keep_below_high_water(&self) {
        let limit =
            (self.cfg.capacity as u128 * self.cfg.high_water_percent as u128 / 100) as usize;
        while self.live_bytes.load(Ordering::Relaxed) > limit {
            if self.evict_oldest() == 0 {
                break;
            }
        }
    }

    fn stats(&self) -> Stats {
        let a = self.arena.stats();
        let r = self.rec.stats();
        let (mut lookups, mut hits) = (0, 0);
        for c in self
            .counters
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            lookups += c.lookups.load(Ordering::Relaxed);
            hits += c.hits.load(Ordering::Relaxed);
        }
        let entries = self.table.len();
        Stats {
            bytes_live: a.live.saturating_sub(r.pending_bytes),
            bytes_free: a.free,
            bytes_pending: r.pending_bytes,
            bytes_mapped: a.mapped,
            metadata_bytes: self.table.slots() * Map::<Entry>::SLOT_BYTES
                + entries * std::mem::size_of::<Entry>()
                + std::mem::size_of::<Core>(),
            entries,
            lookups,
            hits,
            pending_sets: r.pending_sets,
            retired_sets: r.retired_sets,
            freed_sets: r.freed_sets,
            evictions: self.evictions.load(Ordering::Relaxed),
            resolves: self.links.resolves.load(Ordering::Relaxed),
            patches: self.links.patches.load(Ordering::Relaxed),
            contention: Contention {
                build: self.build_contention.load(Ordering::Relaxed),
                link: self.links.contention.load(Ordering::Relaxed),
                table: self.table.contention(),
                arena: a.contention,
                pending: r.contention,
                generations: self.gen_contention.load(Ordering::Relaxed),
            },
            slow_syncs: r.slow_syncs,
            threads: self.rec.threads(),
            deletion_delay: r.delay,
            arena: a,
        }
    }
}

// SAFETY: every block comes from the arena (whose own impl carries the
// argument); this only adds bookkeeping and one eviction on a full cache.
unsafe impl ExecMemory for Core {
    fn alloc(&self, len: usize) -> Result<ExecBlock, ErrorKind> {
        let r = match self.arena.alloc(len) {
            Err(_) if self.evict_oldest() > 0 => self.arena.alloc(len),
            r => r,
        };
        if let Ok(b) = &r {
            self.building.fetch_add(b.len(), Ordering::Relaxed);
        }
        r
    }
}

/// Lock contention counts (the paper's Table 3), per lock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Contention {
    /// The building lock.
    pub build: u64,
    /// The link-change lock.
    pub link: u64,
    /// The lookup table's writers' lock.
    pub table: u64,
    /// The free lists' lock.
    pub arena: u64,
    /// The pending-deletion list's lock.
    pub pending: u64,
    /// The generation bookkeeping's lock.
    pub generations: u64,
}

/// A snapshot of the cache's counters (summed over threads' caches in
/// private mode).
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Bytes of code (blocks and link sites) reachable from the table.
    pub bytes_live: usize,
    /// Bytes on the free lists.
    pub bytes_free: usize,
    /// Bytes unlinked and waiting for deletion.
    pub bytes_pending: usize,
    /// Bytes of executable memory mapped.
    pub bytes_mapped: usize,
    /// Bytes of the cache's data structures (table, entries, the core).
    pub metadata_bytes: usize,
    /// Entries in the table.
    pub entries: usize,
    /// Lookups made.
    pub lookups: u64,
    /// Lookups that found code.
    pub hits: u64,
    /// Sets waiting on the pending-deletion list.
    pub pending_sets: usize,
    /// Sets retired so far.
    pub retired_sets: u64,
    /// Sets freed so far.
    pub freed_sets: u64,
    /// Entries evicted for capacity.
    pub evictions: u64,
    /// Calls through unlinked link sites that went to the resolver.
    pub resolves: u64,
    /// Jumps repatched (links made and undone).
    pub patches: u64,
    /// Lock contention per lock.
    pub contention: Contention,
    /// Synchronization points that walked the pending list.
    pub slow_syncs: u64,
    /// Registered threads.
    pub threads: usize,
    /// Time from unlink to free, per set.
    pub deletion_delay: DelayHistogram,
    /// The free lists' own counters.
    pub arena: ArenaStats,
}

impl Stats {
    fn add(&mut self, o: Stats) {
        self.bytes_live += o.bytes_live;
        self.bytes_free += o.bytes_free;
        self.bytes_pending += o.bytes_pending;
        self.bytes_mapped += o.bytes_mapped;
        self.metadata_bytes += o.metadata_bytes;
        self.entries += o.entries;
        self.lookups += o.lookups;
        self.hits += o.hits;
        self.pending_sets += o.pending_sets;
        self.retired_sets += o.retired_sets;
        self.freed_sets += o.freed_sets;
        self.evictions += o.evictions;
        self.resolves += o.resolves;
        self.patches += o.patches;
        self.slow_syncs += o.slow_syncs;
        self.threads += o.threads;
        let (c, d) = (&mut self.contention, o.contention);
        c.build += d.build;
        c.link += d.link;
        c.table += d.table;
        c.arena += d.arena;
        c.pending += d.pending;
        c.generations += d.generations;
        let h = &mut self.deletion_delay.buckets;
        h.resize(h.len().max(o.deletion_delay.buckets.len()), 0);
        for (a, b) in h.iter_mut().zip(o.deletion_delay.buckets) {
            *a += b;
        }
        self.arena.mapped += o.arena.mapped;
        self.arena.live += o.arena.live;
        self.arena.free += o.arena.free;
        self.arena.allocs += o.arena.allocs;
        self.arena.contention += o.arena.contention;
    }
}

/// A code cache: shared by every registered thread, or (in
/// [`Sharing::Private`] mode) one per thread behind the same API.
///
/// ```
/// use codecache::{CodeCache, Config};
/// use vcode::{Func, I, Leaf};
///
/// let cache = CodeCache::new(Config::default());
/// // Publish version 1 of the code for key 7: `x + 7`.
/// cache.publish(7, 1, |e| {
///     let mut f = Func::new();
///     let p = f.lambda("%i", Leaf::Yes)?;
///     let x = p.get::<I>(0)?;
///     f.add(x, x, 7);
///     f.ret(x);
///     f.end_in(e.mem())
/// })?;
/// // A worker thread registers once, and runs code inside a scope.
/// let mut me = cache.register();
/// {
///     let scope = me.enter();
///     let entry = scope.lookup(7).expect("published");
///     // SAFETY: the function only computes on its argument, and the
///     // pointer is not used after the scope ends.
///     let f = unsafe { entry.code().as_fn::<extern "C" fn(i32) -> i32>()? };
///     assert_eq!(f(35), 42);
/// }
/// // Blocking calls run flagged out: they never delay deletion.
/// me.blocking(|| std::thread::sleep(std::time::Duration::from_millis(1)));
/// // Retire: unlinked now, freed once every running thread synchronized.
/// assert!(cache.retire(7));
/// drop(me);
/// assert_eq!(cache.stats().bytes_pending, 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct CodeCache {
    cfg: Config,
    shared: Option<Arc<Core>>,
    private: Mutex<Vec<Weak<Core>>>,
}

impl CodeCache {
    /// A cache set up by `cfg`.
    pub fn new(cfg: Config) -> CodeCache {
        CodeCache {
            shared: (cfg.sharing == Sharing::Shared).then(|| Arc::new(Core::new(cfg.clone()))),
            cfg,
            private: Mutex::new(Vec::new()),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    fn cores(&self) -> Vec<Arc<Core>> {
        match &self.shared {
            Some(c) => vec![c.clone()],
            None => {
                let mut v = self.private.lock().unwrap_or_else(|p| p.into_inner());
                v.retain(|w| w.strong_count() > 0);
                v.iter().filter_map(Weak::upgrade).collect()
            }
        }
    }

    /// Registers the calling thread (or the thread the handle is moved
    /// to). Until the handle is dropped, the thread counts in every
    /// deletion unless it is flagged out.
    pub fn register(&self) -> Thread {
        let core = match &self.shared {
            Some(c) => c.clone(),
            None => {
                let c = Arc::new(Core::new(self.cfg.clone()));
                self.private
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(Arc::downgrade(&c));
                c
            }
        };
        let counters = Arc::new(Counters::default());
        core.counters
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(counters.clone());
        let me = core.rec.register();
        let rec = core.rec.clone();
        Thread {
            me,
            counters,
            core,
            rec,
        }
    }

    /// Publishes code for `key` at `version`, built by `build` into the
    /// cache's memory, and retires the code it replaces (unlinked at once,
    /// freed once no thread can be running it). In private mode the code is
    /// built once for each registered thread's cache.
    ///
    /// This is the publisher's whole interface: build, publish, and the old
    /// version is retired.
    pub fn publish<F, E>(&self, key: u64, version: u64, mut build: F) -> Result<(), Error>
    where
        F: FnMut(&mut Emit<'_>) -> Result<vcode::Code, E>,
        E: Into<Error>,
    {
        for c in self.cores() {
            c.publish(key, version, &mut build)?;
        }
        Ok(())
    }

    /// Unlinks the code for `key` and queues it for deletion. Returns false
    /// if nothing was published under it.
    pub fn retire(&self, key: u64) -> bool {
        self.retire_set(&[key]) > 0
    }

    /// Unlinks the code for all of `keys` as one set (one entry on the
    /// pending-deletion list). Returns how many were found (summed over
    /// threads' caches in private mode).
    pub fn retire_set(&self, keys: &[u64]) -> usize {
        self.cores().iter().map(|c| c.retire_keys(keys)).sum()
    }

    /// Evicts the oldest generation now; returns how many entries.
    pub fn evict_oldest(&self) -> usize {
        self.cores().iter().map(|c| c.evict_oldest()).sum()
    }

    /// Counters, summed over threads' caches in private mode.
    pub fn stats(&self) -> Stats {
        let mut s = Stats::default();
        for c in self.cores() {
            s.add(c.stats());
        }
        s
    }
}

/// A registered thread. Dropping it (thread exit) is a synchronization
/// point.
pub struct Thread {
    /// Registered by `core`'s reclaimer when the thread was made
    /// ([`CodeCache::register`]), unregistered when it is dropped.
    me: Participation,
    counters: Arc<Counters>,
    core: Arc<Core>,
    /// `core`'s reclaimer, kept here too so that the thread's
    /// synchronization points and [`Thread::pinned`] reach its stamp with
    /// one load fewer (through the thread, not the core).
    rec: Arc<Reclaimer>,
}

impl Thread {
    /// Enters a scope in which the thread may look code up and run it.
    /// Entering and leaving are synchronization points: a load and a
    /// compare unless something was retired since the last one.
    #[inline]
    pub fn enter(&mut self) -> Scope<'_> {
        let me = &mut self.me;
        Scope {
            guard: self.rec.enter(me),
            core: &self.core,
            counters: &self.counters,
        }
    }

    /// [`Thread::enter`] for a short scope entered again and again (an
    /// applet invoked per message): entering is a synchronization point,
    /// leaving is not ([`crate::deletion::Reclaimer::enter_brief`]). Code
    /// retired while the scope runs is freed after the thread's next
    /// synchronization point (its next scope, [`Thread::flag_out`] or its
    /// exit) instead of at the scope's end.
    #[inline]
    pub fn enter_brief(&mut self) -> Scope<'_> {
        let me = &mut self.me;
        Scope {
            guard: self.rec.enter_brief(me),
            core: &self.core,
            counters: &self.counters,
        }
    }

    /// The code `memo` remembers for `key`, without entering a scope
    /// ([`crate::table::Map::get_pinned`]): found only while nothing has
    /// been retired since the memo was filled (by [`Scope::lookup_memo`])
    /// and this thread is flagged in and synchronized at that stamp, so
    /// that the scope's entry would have had nothing to do. It stays alive
    /// while the thread is borrowed. `None`: enter a scope
    /// ([`Thread::enter_brief`]) and look up through the memo, which also
    /// frees what was retired meanwhile. Not counted as a look-up in
    /// [`Stats::lookups`] (nothing is looked up).
    #[inline]
    pub fn lookup_pinned(&mut self, key: u64, memo: &Memo) -> Option<&Entry> {
        self.core.table.get_pinned(&mut self.me, key, memo)
    }

    /// The code `pin` holds, without entering a scope: the check of
    /// [`Thread::lookup_pinned`] made on a [`Pin`] instead of a [`Memo`],
    /// for the caller that runs one entry's code again and again (an
    /// applet on every message) and keeps its pin beside its key. Found
    /// only where the pin is of this cache's reclaimer, nothing has been
    /// retired since it was made ([`Scope::lookup_pin`]), and this thread
    /// is flagged in and synchronized at that stamp, so that a scope's
    /// entry would have had nothing to do; the code stays alive while the
    /// thread is borrowed ([`Pinned`]). `None`: enter a scope and make the
    /// pin again, which also frees what was retired meanwhile.
    ///
    /// The pin does not say which key it was made for (the map and key
    /// compares of [`Thread::lookup_pinned`] are what it saves): the
    /// caller keeps one pin per key, as it keeps one memo.
    #[inline]
    pub fn pinned(&mut self, pin: &Pin) -> Option<Pinned<'_>> {
        let me = &self.me;
        // `me` is this thread's, registered by its core's reclaimer
        // (`CodeCache::register`). The pin is that reclaimer's if this
        // holds, with no compare of the reclaimers' ids (a pin keeps its
        // reclaimer's only in debug builds, for the assertion below):
        // `pin.stamp` was read from the pin's reclaimer, and it equals a
        // stamp of `me`'s, which no other reclaimer ever holds (stamps are
        // unique across reclaimers, `deletion::next_stamp`). The default
        // pin's stamp, 0, is no reclaimer's.
        if !self.rec.is_current_own(me, pin.stamp) {
            return None;
        }
        #[cfg(debug_assertions)]
        debug_assert_eq!(pin.rec, me.reclaimer_id());
        // Alive, by `Map::get_pinned`'s argument: the pin's entry was in
        // this cache's map (the pin is this thread's reclaimer's, so this
        // cache's: a reclaimer belongs to one core) when a scope found it
        // after reading `pin.stamp`; it is freed only after a retire that
        // stores a later stamp, once every thread counted in that retire
        // has passed a synchronization point that saw it. The stamp is
        // `pin.stamp` now, this thread's last synchronization point saw
        // the same and it is flagged in, so it is counted in any such
        // retire and cannot pass a synchronization point while `Pinned`
        // borrows it.
        Some(Pinned {
            addr: pin.addr,
            _thread: core::marker::PhantomData,
        })
    }

    /// Runs `f` flagged out (the paper's system-call flag): for a blocking
    /// call, a wait or an idle poll. The thread is counted in no deletion
    /// while `f` runs, and it cannot touch cached code (the handle is
    /// borrowed).
    pub fn blocking<R>(&mut self, f: impl FnOnce() -> R) -> R {
        let me = &self.me;
        self.rec.flag_out(me);
        let r = f();
        self.rec.flag_in(me);
        r
    }

    /// Flags the thread out until [`Thread::enter`] (which flags it in):
    /// for a thread that goes idle for an unknown time.
    pub fn flag_out(&mut self) {
        self.rec.flag_out(&self.me);
    }

    /// Publishes into this thread's cache (the same as
    /// [`CodeCache::publish`] in shared mode; only this thread's cache in
    /// private mode).
    pub fn publish<F, E>(&self, key: u64, version: u64, build: F) -> Result<(), Error>
    where
        F: FnOnce(&mut Emit<'_>) -> Result<vcode::Code, E>,
        E: Into<Error>,
    {
        self.core.publish(key, version, build)
    }
}

impl Drop for Thread {
    fn drop(&mut self) {
        self.rec.unregister(&self.me);
    }
}

/// The address of an entry's code, remembered with the stamp under which
/// a scope found the entry ([`Scope::lookup_pin`]), for
/// [`Thread::pinned`]: the compares of the stamps instead of a look-up
/// (the stamp, unique across reclaimers, also says whose the pin is).
/// Plain numbers, so that whatever holds one stays `Send`; it grants
/// nothing by itself. The default pin (stamp 0, which no reclaimer
/// holds) is refused.
#[derive(Debug, Default, Clone, Copy)]
pub struct Pin {
    /// The id of the reclaimer whose stamp `stamp` is, kept in debug
    /// builds only, for [`Thread::pinned`]'s assertion that the stamp
    /// says whose the pin is: release builds rely on the stamps'
    /// uniqueness and write nothing for it per look-up.
    #[cfg(debug_assertions)]
    rec: u64,
    stamp: u64,
    addr: usize,
}

/// Code found alive by [`Thread::pinned`]: alive while the thread it was
/// found through stays borrowed (no synchronization point of that thread
/// can pass meanwhile, and the thread is counted in every retire).
#[derive(Debug)]
pub struct Pinned<'t> {
    addr: usize,
    _thread: core::marker::PhantomData<&'t mut Thread>,
}

impl Pinned<'_> {
    /// The address of the code's first instruction ([`vcode::Code::addr`]).
    #[inline]
    pub fn addr(&self) -> usize {
        self.addr
    }
}

/// A thread between two synchronization points: code looked up here stays
/// alive until the scope ends. Never block inside a scope; leave it, or
/// use [`Thread::blocking`].
pub struct Scope<'t> {
    guard: Guard<'t>,
    core: &'t Core,
    counters: &'t Counters,
}

impl<'t> Scope<'t> {
    /// The current code for `key`, without locks.
    #[inline]
    pub fn lookup(&self, key: u64) -> Option<&Entry> {
        let r = self.core.table.get(key, &self.guard);
        self.count(r.is_some());
        r
    }

    /// Counts a look-up in this thread's counters (its own: plain stores).
    #[inline]
    fn count(&self, hit: bool) {
        let c = self.counters;
        c.lookups
            .store(c.lookups.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        if hit {
            c.hits
                .store(c.hits.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        }
    }

    /// [`Scope::lookup`], remembered in `memo` for the next look-up of
    /// `key` (by any thread): while nothing has been retired since, that
    /// one skips the table (`table::Map::get_memo`). For a caller that runs
    /// the same code again and again, e.g. an applet on every message.
    #[inline]
    pub fn lookup_memo(&self, key: u64, memo: &mut Memo) -> Option<&Entry> {
        let r = self.core.table.get_memo(key, &self.guard, memo);
        self.count(r.is_some());
        r
    }

    /// [`Scope::lookup_memo`], and `pin` made of what it found (or
    /// emptied where it found nothing), for [`Thread::pinned`].
    #[inline]
    pub fn lookup_pin(&self, key: u64, memo: &mut Memo, pin: &mut Pin) -> Option<&Entry> {
        let r = self.lookup_memo(key, memo);
        *pin = match r {
            // The memo's stamp was read before the look-up that found the
            // entry (or is the stamp now, where the memo was reused), so
            // the entry is alive while that stamp is the reclaimer's.
            Some(e) => Pin {
                #[cfg(debug_assertions)]
                rec: self.core.rec.id(),
                stamp: memo.stamp(),
                addr: e.code().addr(),
            },
            None => Pin::default(),
        };
        r
    }

    /// The current code for `key`, built and published by `build` (at
    /// `version`) if there is none: the paper's basic-block building path,
    /// under the building lock with a second lookup.
    pub fn get_or_build<F, E>(&self, key: u64, version: u64, build: F) -> Result<&Entry, Error>
    where
        F: FnOnce(&mut Emit<'_>) -> Result<vcode::Code, E>,
        E: Into<Error>,
    {
        if let Some(e) = self.lookup(key) {
            return Ok(e);
        }
        let e = {
            let _b = lock_counted(&self.core.build, &self.core.build_contention);
            match self.core.table.get(key, &self.guard) {
                Some(e) => e,
                None => {
                    let e = self.core.build_entry(key, version, build)?;
                    let (e, old) = self.core.table.insert_in(key, e, &self.guard);
                    if let Some(old) = old {
                        self.core.unlink_and_retire(vec![old]);
                    }
                    e
                }
            }
        };
        // The entry found or built stays alive for this scope even if
        // another thread (or the high-water mark below) retires it at
        // once: it is returned whatever happens to it after, as a look-up
        // that found it just before its retirement would have returned it.
        // (Looking it up again here failed under a storm of evictions: a
        // JIT invocation rebuilt its code 8 times and trapped.)
        self.core.keep_below_high_water();
        Ok(e)
    }
}
