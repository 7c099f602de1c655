//! The cache's behaviour as a specification: publication and lookup,
//! replacement and delayed deletion (with a thread inside a scope, a thread
//! flagged out, a thread that exits), links and unlinking, capacity
//! eviction, private mode, and W^X.

#![cfg(not(loom))]

mod common;

use codecache::{CodeCache, Config, arena::CHUNK};
use common::*;

type LongFn = extern "C" fn(i64) -> i64;

fn call(scope: &codecache::Scope<'_>, key: u64) -> Option<(i64, u64)> {
    let e = scope.lookup(key)?;
    // SAFETY: the test's functions only compute on their argument (and call
    // through their link); the pointer is used inside the scope.
    let f = unsafe { e.code().as_fn::<LongFn>() }.unwrap();
    Some((f(5), e.version()))
}

#[test]
fn published_code_runs_and_replacement_is_seen() {
    let cache = CodeCache::new(Config::default());
    let mut t = cache.register();
    assert!(t.enter().lookup(1).is_none());
    cache.publish(1, 1, value_fn(1, 1, 0)).unwrap();
    assert_eq!(call(&t.enter(), 1), Some((5 + tag(1, 1), 1)));
    cache.publish(1, 2, value_fn(1, 2, 3)).unwrap();
    assert_eq!(call(&t.enter(), 1), Some((5 + tag(1, 2), 2)));
    let s = cache.stats();
    assert_eq!(s.entries, 1);
    assert_eq!(s.retired_sets, 1);
    assert!(s.lookups >= 3 && s.hits >= 2);
}

#[test]
fn retired_code_stays_alive_while_a_scope_may_use_it() {
    let cache = CodeCache::new(Config::default());
    cache.publish(1, 1, value_fn(1, 1, 0)).unwrap();
    let mut a = cache.register();
    let mut b = cache.register();
    let sa = a.enter();
    let e = sa.lookup(1).unwrap();
    assert!(cache.retire(1));
    // b passes synchronization points; a is still inside its scope.
    drop(b.enter());
    let s = cache.stats();
    assert_eq!(s.pending_sets, 1);
    assert!(s.bytes_pending > 0);
    // The code a holds still runs.
    // SAFETY: as in `call`.
    let f = unsafe { e.code().as_fn::<LongFn>() }.unwrap();
    assert_eq!(f(0), tag(1, 1));
    drop(sa); // a's synchronization point frees it
    let s = cache.stats();
    assert_eq!((s.pending_sets, s.bytes_pending, s.freed_sets), (0, 0, 1));
    assert_eq!(s.arena.live, 0);
}

/// A brief scope's end is no synchronization point: code retired while
/// it runs stays pending after it ends, and the thread's next scope entry
/// frees it.
#[test]
fn code_retired_during_a_brief_scope_is_freed_at_the_next_entry() {
    let cache = CodeCache::new(Config::default());
    cache.publish(1, 1, value_fn(1, 1, 0)).unwrap();
    let mut a = cache.register();
    let sa = a.enter_brief();
    assert_eq!(call(&sa, 1), Some((5 + tag(1, 1), 1)));
    assert!(cache.retire(1));
    drop(sa);
    let s = cache.stats();
    assert_eq!((s.pending_sets, s.freed_sets), (1, 0));
    assert!(s.bytes_pending > 0);
    let sa = a.enter_brief();
    assert!(sa.lookup(1).is_none());
    let s = cache.stats();
    assert_eq!((s.pending_sets, s.bytes_pending, s.freed_sets), (0, 0, 1));
    assert_eq!(s.arena.live, 0);
}

#[test]
fn a_flagged_out_thread_never_delays_deletion() {
    let cache = CodeCache::new(Config::default());
    let mut blocked = cache.register();
    let mut worker = cache.register();
    cache.publish(1, 1, value_fn(1, 1, 0)).unwrap();
    blocked.blocking(|| {
        cache.publish(1, 2, value_fn(1, 2, 0)).unwrap();
        // Only the worker is counted; its next synchronization point frees
        // version 1 while `blocked` is still "in its system call".
        assert_eq!(cache.stats().pending_sets, 1);
        drop(worker.enter());
        assert_eq!(cache.stats().pending_sets, 0);
    });
    // Back from the call, the thread sees the current version.
    assert_eq!(call(&blocked.enter(), 1), Some((5 + tag(1, 2), 2)));
    // Without the flag, an idle registered thread holds deletion back...
    cache.publish(1, 3, value_fn(1, 3, 0)).unwrap();
    drop(worker.enter());
    assert_eq!(cache.stats().pending_sets, 1);
    // ...until it exits: thread exit is a synchronization point.
    drop(blocked);
    assert_eq!(cache.stats().pending_sets, 0);
    assert_eq!(cache.stats().threads, 1);
}

#[test]
fn with_no_thread_counted_retired_code_is_freed_at_once() {
    let cache = CodeCache::new(Config::default());
    cache.publish(9, 1, value_fn(9, 1, 0)).unwrap();
    let live = cache.stats().bytes_live;
    assert!(live >= 64);
    assert!(cache.retire(9));
    assert!(!cache.retire(9));
    let s = cache.stats();
    assert_eq!((s.bytes_live, s.bytes_pending, s.entries), (0, 0, 0));
    assert_eq!(s.bytes_free, s.bytes_mapped);
    assert_eq!(s.deletion_delay.count(), 1);
}

#[test]
fn links_jump_to_the_current_code_and_unlinking_repatches_them() {
    let cache = CodeCache::new(Config::default());
    let (helper, user) = (100, 1);
    cache.publish(user, 1, linked_fn(user, 1, helper)).unwrap();
    let mut t = cache.register();
    // Helper absent: the call through the link reaches the fallback.
    assert_eq!(call(&t.enter(), user), Some((15 + tag(user, 1), 1)));
    cache.publish(helper, 1, helper_fn(1)).unwrap();
    // First call goes through the resolver, which links the site.
    assert_eq!(call(&t.enter(), user), Some((15 + tag(user, 1), 1)));
    {
        let s = t.enter();
        assert!(s.lookup(user).unwrap().links()[0].is_linked());
    }
    let resolves = cache.stats().resolves;
    // Linked now: further calls jump straight to the helper.
    for _ in 0..10 {
        assert_eq!(call(&t.enter(), user), Some((15 + tag(user, 1), 1)));
    }
    assert_eq!(cache.stats().resolves, resolves);
    // Replacing the helper unlinks the old one: the site goes back to its
    // exit, and the next call relinks it to version 2.
    cache.publish(helper, 2, helper_fn(2)).unwrap();
    {
        let s = t.enter();
        assert!(!s.lookup(user).unwrap().links()[0].is_linked());
    }
    assert_eq!(call(&t.enter(), user), Some((15 + tag(user, 1), 1)));
    assert_eq!(cache.stats().resolves, resolves + 1);
    // Retiring the helper: back to the fallback.
    cache.retire(helper);
    assert_eq!(call(&t.enter(), user), Some((15 + tag(user, 1), 1)));
    drop(t);
    cache.retire(user);
    let s = cache.stats();
    assert_eq!((s.bytes_live, s.bytes_pending), (0, 0));
    assert_eq!(s.bytes_free, s.bytes_mapped);
}

#[test]
fn a_full_cache_evicts_its_oldest_generation_in_one_batch() {
    let cap = 4 * CHUNK;
    let cache = CodeCache::new(Config::with_capacity(cap));
    let mut t = cache.register();
    // ~1 KiB functions (1024-byte blocks): 4 chunks hold 256 of them.
    for k in 0..1000u64 {
        cache.publish(k, 1, value_fn(k, 1, 110)).unwrap();
        drop(t.enter()); // a synchronization point now and then
        let s = cache.stats();
        assert!(s.bytes_mapped <= cap);
        assert!(s.bytes_live <= cap * 3 / 4, "{s:?}");
    }
    let s = cache.stats();
    assert!(s.evictions > 500, "{s:?}");
    assert!(s.entries < 200 && s.entries > 50, "{s:?}");
    let scope = t.enter();
    // The newest survive, the oldest went first.
    assert_eq!(call(&scope, 999), Some((5 + tag(999, 1), 1)));
    assert!(scope.lookup(0).is_none());
    let oldest_live = (0..1000).find(|&k| scope.lookup(k).is_some()).unwrap();
    assert!((oldest_live..1000).all(|k| scope.lookup(k).is_some()));
    drop(scope);
    assert_eq!(cache.stats().pending_sets, 0);
}

#[test]
fn an_allocation_that_cannot_fit_reports_a_full_cache() {
    let cache = CodeCache::new(Config::with_capacity(CHUNK));
    let mut t = cache.register();
    let s = t.enter();
    // Published inside a scope, the evicted code cannot be freed before the
    // scope ends, so a second big function does not fit yet.
    // ~40 KiB of code: a 64 KiB block, the whole capacity. Above the high
    // water mark, it is evicted as soon as it is published.
    cache.publish(1, 1, value_fn(1, 1, 5000)).unwrap();
    let r = cache.publish(2, 1, value_fn(2, 1, 5000));
    assert!(r.is_err(), "{:?}", cache.stats());
    assert!(s.lookup(1).is_none(), "evicted to make room");
    drop(s);
    // Built inside a scope above the high water mark, the code is evicted
    // as soon as it is published, but `get_or_build` hands back the entry
    // it built, alive (and runnable) until the scope ends; a look-up no
    // longer finds it, and the scope's end lets it be freed.
    let s = t.enter();
    let e = s
        .get_or_build(2, 1, value_fn(2, 1, 5000))
        .expect("the entry built, alive for the scope though evicted");
    // SAFETY: as in `call`: the function computes on its argument, and
    // runs inside the scope that keeps its entry alive.
    let f = unsafe { e.code().as_fn::<LongFn>() }.unwrap();
    assert_eq!((f(5), e.version()), (5 + tag(2, 1), 1));
    assert!(
        s.lookup(2).is_none(),
        "evicted at once, above the high water mark"
    );
    drop(s);
    assert_eq!(cache.stats().pending_sets, 0, "freed once the scope ended");
    let mut cfg = Config::with_capacity(CHUNK);
    cfg.high_water_percent = 100;
    let cache = CodeCache::new(cfg);
    cache.publish(2, 1, value_fn(2, 1, 5000)).unwrap();
    assert_eq!(call(&cache.register().enter(), 2), Some((5 + tag(2, 1), 1)));
}

#[test]
fn private_mode_builds_once_per_thread() {
    let cache = CodeCache::new(Config::default().private());
    let mut a = cache.register();
    let mut b = cache.register();
    cache.publish(1, 1, value_fn(1, 1, 0)).unwrap();
    assert_eq!(call(&a.enter(), 1), Some((5 + tag(1, 1), 1)));
    assert_eq!(call(&b.enter(), 1), Some((5 + tag(1, 1), 1)));
    let s = cache.stats();
    assert_eq!(s.entries, 2);
    assert_eq!(s.bytes_mapped, 2 * CHUNK);
    // get_or_build fills only the calling thread's cache.
    {
        let sa = a.enter();
        let e = sa.get_or_build(2, 1, value_fn(2, 1, 0)).unwrap();
        assert_eq!(e.version(), 1);
    }
    assert!(b.enter().lookup(2).is_none());
    assert_eq!(cache.retire_set(&[1, 2]), 3);
    drop((a, b));
    assert_eq!(cache.stats().entries, 0);
}

#[test]
fn get_or_build_builds_once() {
    let cache = CodeCache::new(Config::default());
    let mut t = cache.register();
    let s = t.enter();
    let mut builds = 0;
    for _ in 0..3 {
        let e = s
            .get_or_build(5, 1, |e| {
                builds += 1;
                value_fn(5, 1, 0)(e)
            })
            .unwrap();
        assert_eq!(e.key(), 5);
    }
    assert_eq!(builds, 1);
}

#[test]
fn no_mapping_is_ever_writable_and_executable() {
    assert!(wx_mappings().is_empty(), "{:?}", wx_mappings());
    let cache = CodeCache::new(Config::with_capacity(8 * CHUNK));
    let mut t = cache.register();
    for k in 0..300u64 {
        cache
            .publish(k, k, value_fn(k, k, (k % 40) as usize))
            .unwrap();
        if k % 3 == 0 {
            cache
                .publish(1000 + k, 1, linked_fn(1000 + k, 1, k))
                .unwrap();
            let s = t.enter();
            let helper = if s.lookup(k).is_some() {
                5 + tag(k, k)
            } else {
                15
            };
            assert_eq!(
                call(&s, 1000 + k).map(|r| r.0),
                Some(helper + tag(1000 + k, 1))
            );
        }
        if k % 7 == 0 {
            cache.retire(k / 2);
        }
        assert!(wx_mappings().is_empty(), "{:?}", wx_mappings());
    }
}

/// Runs the code `pin` holds for `t`, if `Thread::pinned` admits it.
fn call_pinned(t: &mut codecache::Thread, pin: &codecache::Pin) -> Option<i64> {
    let p = t.pinned(pin)?;
    // SAFETY: as in `call`; the code stays alive while `p` borrows `t`.
    let f: LongFn = unsafe { core::mem::transmute::<usize, LongFn>(p.addr()) };
    Some(f(5))
}

/// A pin admits its code until anything is retired: then it is refused
/// (the code may be freed at the thread's next synchronization point),
/// and a scope's look-up makes it again, for the replacement. The empty
/// pin is refused.
#[test]
fn a_pin_is_refused_once_anything_is_retired_and_made_again_by_a_scope() {
    let cache = CodeCache::new(Config::default());
    cache.publish(1, 1, value_fn(1, 1, 0)).unwrap();
    let mut t = cache.register();
    let (mut memo, mut pin) = (codecache::Memo::default(), codecache::Pin::default());
    assert_eq!(call_pinned(&mut t, &pin), None, "the empty pin");
    assert!(t.enter_brief().lookup_pin(1, &mut memo, &mut pin).is_some());
    assert_eq!(call_pinned(&mut t, &pin), Some(5 + tag(1, 1)));
    assert_eq!(call_pinned(&mut t, &pin), Some(5 + tag(1, 1)));
    cache.publish(1, 2, value_fn(1, 2, 3)).unwrap();
    assert_eq!(call_pinned(&mut t, &pin), None, "version 1 was retired");
    assert!(t.enter_brief().lookup_pin(1, &mut memo, &mut pin).is_some());
    assert_eq!(call_pinned(&mut t, &pin), Some(5 + tag(1, 2)));
    // Version 1 was freed at the scope's entry, while no pin admitted it.
    assert_eq!(cache.stats().pending_sets, 0);
    assert!(cache.retire(1));
    assert_eq!(call_pinned(&mut t, &pin), None, "retired, not replaced");
    assert!(t.enter_brief().lookup_pin(1, &mut memo, &mut pin).is_none());
    assert_eq!(call_pinned(&mut t, &pin), None, "nothing found: empty");
}

/// A pin made in one cache is refused by another cache's thread, even
/// where the two caches' stamps agree; and a thread flagged out refuses
/// its pin until a scope flags it in again.
/// A thread's pin after it flagged out and in again: refused if anything
/// was retired while it was out (it was counted in no retire then, so the
/// pinned code may have been freed), accepted if nothing was (nothing can
/// have been freed). `Thread::pinned` tests the thread's side with its own
/// copy of its stamp-or-flagged-out; this checks that the copy follows
/// `flag_out`, `flag_in` and `blocking`.
#[test]
fn a_pin_survives_a_flag_out_only_while_nothing_was_retired() {
    let a = CodeCache::new(Config::default());
    a.publish(1, 1, value_fn(1, 1, 0)).unwrap();
    a.publish(2, 1, value_fn(2, 1, 0)).unwrap();
    let mut t = a.register();
    let (mut memo, mut pin) = (codecache::Memo::default(), codecache::Pin::default());
    assert!(t.enter_brief().lookup_pin(1, &mut memo, &mut pin).is_some());
    assert_eq!(call_pinned(&mut t, &pin), Some(5 + tag(1, 1)));
    // Out and in with nothing retired: the pin holds.
    t.blocking(|| ());
    assert_eq!(
        call_pinned(&mut t, &pin),
        Some(5 + tag(1, 1)),
        "nothing retired"
    );
    t.flag_out();
    assert_eq!(call_pinned(&mut t, &pin), None, "flagged out");
    drop(t.enter_brief());
    assert_eq!(call_pinned(&mut t, &pin), Some(5 + tag(1, 1)), "in again");
    // Out, a retire meanwhile, in: refused until a scope makes it again.
    t.blocking(|| assert!(a.retire(2)));
    assert_eq!(call_pinned(&mut t, &pin), None, "retired while out");
    assert!(t.enter_brief().lookup_pin(1, &mut memo, &mut pin).is_some());
    assert_eq!(call_pinned(&mut t, &pin), Some(5 + tag(1, 1)));
}

#[test]
fn a_pin_is_refused_by_another_cache_and_while_flagged_out() {
    let a = CodeCache::new(Config::default());
    let b = CodeCache::new(Config::default());
    a.publish(1, 1, value_fn(1, 1, 0)).unwrap();
    b.publish(1, 1, value_fn(1, 1, 0)).unwrap();
    let mut ta = a.register();
    let mut tb = b.register();
    let (mut memo, mut pin) = (codecache::Memo::default(), codecache::Pin::default());
    assert!(
        ta.enter_brief()
            .lookup_pin(1, &mut memo, &mut pin)
            .is_some()
    );
    drop(tb.enter_brief());
    assert_eq!(call_pinned(&mut ta, &pin), Some(5 + tag(1, 1)));
    assert_eq!(call_pinned(&mut tb, &pin), None, "a pin of cache a");
    ta.flag_out();
    assert_eq!(call_pinned(&mut ta, &pin), None, "flagged out");
    drop(ta.enter_brief());
    assert_eq!(call_pinned(&mut ta, &pin), Some(5 + tag(1, 1)));
}
