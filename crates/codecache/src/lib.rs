//! # codecache: a thread-shared code cache
//!
//! One cache of generated code for every thread of the fastpath engine:
//! lookup by key without locks, code replaced while traffic flows, and
//! replaced code freed promptly but never while a thread may still run it.
//! It implements the design of Derek Bruening, Vladimir Kiriansky, Timothy
//! Garnett and Sanjeev Banerji, *Thread-Shared Software Code Caches*
//! (CGO 2006; `shared/seeds/002_67ded740f25f48ee.txt`), for code that comes
//! from [`vcode`] rather than from binary translation:
//!
//! | paper | here |
//! |---|---|
//! | §6 fine-grained locks, none held in the cache | `cache.rs`: a building lock, a link lock, one lock per global structure; [`Stats::contention`] counts contention per lock |
//! | §8 lock-free in-cache lookup: tag written last, removal sentinel, lazily freed old tables | [`table`] |
//! | §9.1 unlinking through atomically patched direct jumps | [`link`] |
//! | §9.2 delayed deletion: timestamps, pending list with reference counts, the system-call flag | [`deletion`] |
//! | §9.2 free lists of various sizes; capacity that allows for the deletion delay | [`arena`], [`Config::high_water_percent`] |
//! | §3 thread-private caches, for comparison | [`Sharing::Private`] |
//!
//! ## Entry points
//!
//! * [`CodeCache::new`] with a [`Config`]; [`CodeCache::publish`] builds
//!   code with `vcode` straight into the cache ([`Emit::mem`] for
//!   [`vcode::Func::end_in`], [`Emit::link`] for patchable jumps to other
//!   keys) and retires the version it replaces; [`CodeCache::retire`] and
//!   [`CodeCache::retire_set`] unlink and queue for deletion;
//!   [`CodeCache::stats`].
//! * [`CodeCache::register`] gives a worker its [`Thread`];
//!   [`Thread::enter`] opens a [`Scope`] (two synchronization points, a
//!   load and a compare each) in which [`Scope::lookup`] reads the table
//!   without locks and the code found may run; [`Thread::blocking`] runs a
//!   blocking call flagged out.
//! * The protocols on their own, generic and loom-tested:
//!   [`deletion::Reclaimer`] (register, `enter` a scope, flag out, retire)
//!   and [`table::Map`] (lock-free `get` under a scope's guard; `insert`
//!   and `remove` hand back the old value as a [`table::Unlinked`], which
//!   can only be retired, never freed directly).
//!
//! A classifier publisher (dpf) uses exactly three calls: `publish(key,
//! version, build)` for a new version, `scope.lookup(key)` on the packet
//! path, and `retire(key)` when a filter goes away (replacement retires
//! the old version by itself):
//!
//! ```
//! use codecache::{CodeCache, Config};
//! use vcode::{Func, I, Leaf};
//!
//! let cache = CodeCache::new(Config::default());
//! let classifier = |id: i32| {
//!     move |e: &mut codecache::Emit<'_>| {
//!         let mut f = Func::new();
//!         let _p = f.lambda("%p%i", Leaf::Yes)?;
//!         let r = f.getreg::<I>(vcode::Class::Temp)?;
//!         f.set(r, id);
//!         f.ret(r);
//!         f.end_in(e.mem())
//!     }
//! };
//! const KEY: u64 = 1;
//! cache.publish(KEY, 1, classifier(10))?;
//! let mut worker = cache.register();
//! let packet = [0u8; 64];
//! let run = |w: &mut codecache::Thread| {
//!     let scope = w.enter();
//!     let e = scope.lookup(KEY).unwrap();
//!     // SAFETY: the classifier only returns a constant; the pointer dies
//!     // with the scope.
//!     let f = unsafe { e.code().as_fn::<extern "C" fn(*const u8, i32) -> i32>() }.unwrap();
//!     f(packet.as_ptr(), packet.len() as i32)
//! };
//! assert_eq!(run(&mut worker), 10);
//! cache.publish(KEY, 2, classifier(20))?; // version 1 is retired
//! assert_eq!(run(&mut worker), 20); // and freed at this scope's entry
//! assert_eq!(cache.stats().bytes_pending, 0);
//! # Ok::<(), codecache::Error>(())
//! ```
//!
//! ## Why this table and this deletion scheme
//!
//! The issue allows an established concurrent map or epoch library if it
//! keeps the same guarantees. `dashmap` does not: every read takes a
//! shard's read lock, so reads can block behind a writer. crossbeam-epoch
//! is as prompt on the benchmark's churn, but keeps no per-set pending list
//! (bytes pending, delay per set), frees only when some thread pins again
//! rather than at the last thread's synchronization point, and costs about
//! three times as much per synchronization point; see [`deletion`]. The benchmark (`fastpath bench codecache`
//! and `benches/codecache.rs`) measures both alternatives against these.
//!
//! ## Safety contract for running code
//!
//! Code found in a scope may run only inside that scope, on that thread:
//! a function pointer taken from an [`Entry`] must not be called after the
//! scope ends. Generated code that calls through a [`link::Link`] relies on
//! the same rule (its resolver reads the table as the scope's thread).
//!
//! ## Dependencies
//!
//! * `vcode`: the code it stores, and the executable-memory interface
//!   ([`vcode::mem::ExecMemory`], [`vcode::mem::DualMap`]) it implements.
//! * `thiserror`: the typed errors.
//! * `loom` (only with `--cfg loom`): model checking of the table and the
//!   deletion protocol (`tests/loom.rs`).
//! * Dev: `iced-x86` (checks the hand-encoded trampoline), `criterion`,
//!   `dashmap` and `crossbeam-epoch` (the benchmark's comparisons).

// Under `--cfg loom` only the two protocols are built (see Cargo.toml).
#[cfg(not(loom))]
pub mod arena;
#[cfg(not(loom))]
mod cache;
pub mod deletion;
#[cfg(not(loom))]
pub mod link;
mod sync;
pub mod table;

#[cfg(not(loom))]
pub use arena::AllocError;
#[cfg(not(loom))]
pub use cache::{
    CodeCache, Config, Contention, Emit, Entry, Error, Pin, Pinned, Scope, Sharing, Stats, Thread,
};
pub use deletion::DelayHistogram;
pub use table::Memo;
