//! loom models of the two protocols, run with
//! `RUSTFLAGS="--cfg loom" cargo test -p codecache --release --test loom`.
//!
//! Values carry a `loom::cell::UnsafeCell` that readers read and the drop
//! (the "free") writes: loom reports any free that is not ordered after
//! every read that could still see the value, i.e. a use after free.
#![cfg(loom)]

use codecache::deletion::Reclaimer;
use codecache::table::{Map, Memo};
use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

struct Val(UnsafeCell<u64>);

impl Val {
    fn new(v: u64) -> Box<Val> {
        Box::new(Val(UnsafeCell::new(v)))
    }
    fn get(&self) -> u64 {
        // SAFETY: loom checks this read against the write in `drop`.
        self.0.with(|p| unsafe { *p })
    }
}

impl Drop for Val {
    fn drop(&mut self) {
        // SAFETY: loom checks this write against every read.
        self.0.with_mut(|p| unsafe { *p = 0xdead });
    }
}

/// Retires what an insert or remove unlinked (dropping it retires it).
fn retire(v: Option<codecache::table::Unlinked<Val>>) {
    drop(v);
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(f);
}

/// Publish, replace, remove and resize against a reader: the reader sees
/// only complete entries of the right key, and nothing it can see is freed
/// before its scope ends.
#[test]
fn publish_lookup_remove_resize() {
    model(|| {
        let map = Arc::new(Map::<Val>::new(std::sync::Arc::new(Reclaimer::new())));
        let rec = map.reclaimer().clone();
        retire(map.insert(1, Val::new(10)));
        let mut me = rec.register();
        let reader = {
            let (rec, map) = (rec.clone(), map.clone());
            thread::spawn(move || {
                for _ in 0..2 {
                    let g = rec.enter(&mut me);
                    if let Some(v) = map.get(1, &g) {
                        let x = v.get();
                        assert!(x == 10 || x == 11, "{x}");
                    }
                    if let Some(v) = map.get(2, &g) {
                        assert_eq!(v.get(), 20);
                    }
                    if let Some(v) = map.get(3, &g) {
                        assert_eq!(v.get(), 30);
                    }
                    drop(g);
                }
                rec.unregister(&me);
            })
        };
        // Add 2, replace key 1, add 3 (the third key resizes the table of
        // 4 slots), remove 1.
        retire(map.insert(2, Val::new(20)));
        retire(map.insert(1, Val::new(11)));
        retire(map.insert(3, Val::new(30)));
        retire(map.remove(1));
        reader.join().unwrap();
        assert_eq!(rec.stats().pending_sets, 0);
        assert_eq!(map.len(), 2);
    });
}

/// Removal with a reader in a scope, a thread flagged out (a blocking
/// call) that comes back, and a thread that exits: the value is freed
/// exactly when the last counted thread synchronizes, never earlier, and
/// the flagged-out thread neither delays nor is owed the set.
#[test]
fn deletion_with_a_flagged_out_thread_and_an_exiting_thread() {
    model(|| {
        let map = Arc::new(Map::<Val>::new(std::sync::Arc::new(Reclaimer::new())));
        let rec = map.reclaimer().clone();
        retire(map.insert(1, Val::new(10)));
        let mut runner = rec.register();
        let mut sleeper = rec.register();
        rec.flag_out(&sleeper);
        let t1 = {
            let (rec, map) = (rec.clone(), map.clone());
            thread::spawn(move || {
                let g = rec.enter(&mut runner);
                if let Some(v) = map.get(1, &g) {
                    assert_eq!(v.get(), 10);
                }
                drop(g);
                rec.unregister(&runner); // thread exit
            })
        };
        let t2 = {
            let (rec, map) = (rec.clone(), map.clone());
            thread::spawn(move || {
                // Back from the blocking call: flag in, look up, run.
                let g = rec.enter(&mut sleeper);
                if let Some(v) = map.get(1, &g) {
                    assert_eq!(v.get(), 10);
                }
                drop(g);
                rec.flag_out(&sleeper); // and block again
                rec.unregister(&sleeper);
            })
        };
        retire(map.remove(1));
        t1.join().unwrap();
        t2.join().unwrap();
        let s = rec.stats();
        assert_eq!(s.pending_sets, 0);
        assert_eq!(s.retired_sets, s.freed_sets);
    });
}

/// A thread that never leaves its scope holds the set; the other's
/// synchronization points do not free it.
#[test]
fn a_thread_in_its_scope_holds_the_set() {
    model(|| {
        let map = Arc::new(Map::<Val>::new(std::sync::Arc::new(Reclaimer::new())));
        let rec = map.reclaimer().clone();
        retire(map.insert(1, Val::new(10)));
        let mut holder = rec.register();
        let mut other = rec.register();
        let g = rec.enter(&mut holder);
        let v = map.get(1, &g).unwrap();
        let t = {
            let (rec, map) = (rec.clone(), map.clone());
            thread::spawn(move || {
                retire(map.remove(1));
                drop(rec.enter(&mut other));
                rec.unregister(&other);
            })
        };
        t.join().unwrap();
        assert_eq!(rec.stats().pending_sets, 1);
        assert_eq!(v.get(), 10);
        drop(g);
        assert_eq!(rec.stats().pending_sets, 0);
        rec.unregister(&holder);
    });
}

/// A lookup racing the publication of a new key sees nothing or the whole
/// entry, never a tag without its value.
#[test]
fn a_lookup_racing_a_publication_sees_a_complete_entry() {
    model(|| {
        let map = Arc::new(Map::<Val>::new(std::sync::Arc::new(Reclaimer::new())));
        let rec = map.reclaimer().clone();
        let mut me = rec.register();
        let reader = {
            let (rec, map) = (rec.clone(), map.clone());
            thread::spawn(move || {
                let g = rec.enter(&mut me);
                if let Some(v) = map.get(7, &g) {
                    assert_eq!(v.get(), 70);
                }
                drop(g);
                rec.unregister(&me);
            })
        };
        retire(map.insert(7, Val::new(70)));
        reader.join().unwrap();
    });
}

/// A reader looks key 1 up in two scopes through one memo while the main
/// thread removes it, retires it and passes a synchronization point; `late`
/// reads the stamp after the look-up instead of before; `brief` makes the
/// reader's scopes brief (`Reclaimer::enter_brief`: no synchronization
/// point at their end).
fn memo_race(late: bool, brief: bool) {
    model(move || {
        let map = Arc::new(Map::<Val>::new(std::sync::Arc::new(Reclaimer::new())));
        let rec = map.reclaimer().clone();
        retire(map.insert(1, Val::new(10)));
        let mut me = rec.register();
        let mut other = rec.register();
        let reader = {
            let (rec, map) = (rec.clone(), map.clone());
            thread::spawn(move || {
                let mut memo = Memo::default();
                for _ in 0..2 {
                    let g = if brief {
                        rec.enter_brief(&mut me)
                    } else {
                        rec.enter(&mut me)
                    };
                    let v = if late {
                        map.get_memo_stamp_late(1, &g, &mut memo)
                    } else {
                        map.get_memo(1, &g, &mut memo)
                    };
                    if let Some(v) = v {
                        assert_eq!(v.get(), 10);
                    }
                    drop(g);
                }
                rec.unregister(&me);
            })
        };
        retire(map.remove(1));
        drop(rec.enter(&mut other));
        rec.unregister(&other);
        reader.join().unwrap();
    });
}

/// A remembered look-up (`Map::get_memo`) is reused only while nothing has
/// been retired since: racing a remove, its retire and the other thread's
/// synchronization points, the reader never reads a freed value, neither
/// in the scope where it looked the value up nor in a later one that
/// reuses the look-up.
#[test]
fn a_remembered_lookup_never_outlives_its_value() {
    memo_race(false, false);
}

/// The same race in brief scopes, whose end is no synchronization point
/// (the scope a JIT-compiled applet's invocation runs in): the value stays
/// alive until the reader's next scope begins, and the reader never reads
/// it freed.
#[test]
fn a_remembered_lookup_in_brief_scopes_never_outlives_its_value() {
    memo_race(false, true);
}

/// The same race with the stamp read after the look-up
/// (`Map::get_memo_stamp_late`, wrong on purpose): the model finds the
/// reader reusing a value that was retired between its look-up and that
/// read, after the value was freed.
#[test]
#[should_panic]
fn a_remembered_lookup_whose_stamp_is_read_late_is_caught() {
    memo_race(true, false);
}

/// The late stamp in brief scopes: caught too, so the brief scopes' model
/// run above is not passing for want of interleavings.
#[test]
#[should_panic]
fn a_remembered_lookup_in_brief_scopes_whose_stamp_is_read_late_is_caught() {
    memo_race(true, true);
}

/// A reader runs three invocations through one memo, each first trying
/// the remembered value without a scope (`Map::get_pinned`) and, where
/// that refuses, entering a brief scope and looking up through the memo,
/// while the main thread removes key 1, retires it and passes a
/// synchronization point. `park` flags the reader out between its first
/// and second invocation, as `jive::park` does.
fn pinned_race(park: bool) {
    model(move || {
        let map = Arc::new(Map::<Val>::new(std::sync::Arc::new(Reclaimer::new())));
        let rec = map.reclaimer().clone();
        retire(map.insert(1, Val::new(10)));
        let mut me = rec.register();
        let mut other = rec.register();
        let reader = {
            let (rec, map) = (rec.clone(), map.clone());
            thread::spawn(move || {
                let mut memo = Memo::default();
                for i in 0..3 {
                    if let Some(v) = map.get_pinned(&mut me, 1, &memo) {
                        assert_eq!(v.get(), 10);
                    } else {
                        let g = rec.enter_brief(&mut me);
                        if let Some(v) = map.get_memo(1, &g, &mut memo) {
                            assert_eq!(v.get(), 10);
                        }
                    }
                    if park && i == 0 {
                        rec.flag_out(&me);
                    }
                }
                rec.unregister(&me);
            })
        };
        retire(map.remove(1));
        drop(rec.enter(&mut other));
        rec.unregister(&other);
        reader.join().unwrap();
    });
}

/// The remembered value taken without a scope (the JIT's invocation of an
/// applet while nothing was retired): racing the remove, its retire and
/// the other thread's synchronization point, the reader never reads it
/// freed, and it is freed once both threads are gone.
#[test]
fn a_pinned_lookup_never_outlives_its_value() {
    pinned_race(false);
}

/// The same with the reader flagged out after its first invocation: a
/// flagged-out thread is not counted in the retire, so the value it
/// remembered may be freed at once; `get_pinned` refuses it (the thread
/// is out, or flagged in at the later stamp) and the reader looks up
/// again.
#[test]
fn a_pinned_lookup_after_a_flag_out_never_outlives_its_value() {
    pinned_race(true);
}

/// Stamps are unique across reclaimers (`deletion::next_stamp`), which
/// `Thread::pinned` relies on instead of comparing the pin's reclaimer: a
/// stamp read from reclaimer `a` (racing a retire on `a` by another
/// thread, and after it) is never current for a thread of reclaimer `b`,
/// whose own stamp is. With each reclaimer counting its own stamps (from
/// the same first value, or by one from distinct first values), a stamp
/// of `a` is one `b` holds and the assertion fails.
#[test]
fn a_stamp_of_one_reclaimer_is_never_current_for_another() {
    model(|| {
        let a = Arc::new(Reclaimer::new());
        let b = Reclaimer::new();
        let mut me = b.register();
        let retirer = {
            let a = a.clone();
            thread::spawn(move || a.retire(Vec::new(), 0))
        };
        let check = |me: &mut codecache::deletion::Participation, s: u64| {
            drop(b.enter_brief(me));
            assert!(b.is_current_own(me, b.stamp()), "b's own stamp is current");
            assert!(!b.is_current_own(me, s), "a's stamp {s} current for b");
        };
        // Racing the retire on `a`.
        check(&mut me, a.stamp());
        retirer.join().unwrap();
        // After it, before and after a retire on `b`.
        check(&mut me, a.stamp());
        b.retire(Vec::new(), 0);
        check(&mut me, a.stamp());
        b.unregister(&me);
    });
}
