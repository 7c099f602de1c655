//! The lookup table (paper §8): open addressing with linear probing, read
//! without locks.
//!
//! * **Add**: a writer fills a slot's key and value and only then writes its
//!   tag (`Release`), so a reader that sees the tag (`Acquire`) sees a
//!   complete entry.
//! * **Replace**: the value pointer of a full slot is swapped in one atomic
//!   store; a reader gets the old or the new value, both alive (the old one
//!   is retired, not freed).
//! * **Remove**: the tag becomes [`REMOVED`], a sentinel that is not a hit
//!   but does not end the probe chain. A removed slot is only ever revived
//!   for the *same* key (its key word never changes once written), so a
//!   reader can never match a key against a slot that is being refilled.
//! * **Resize**: a writer builds a new table (dropping the sentinels), points
//!   readers at it with one `Release` store and retires the old one through
//!   the [`Reclaimer`]: it is freed only when no reader can hold it.
//!
//! Writers serialize on one lock per table (a "global structure" lock of
//! the paper's §6); readers take none.
//!
//! An established concurrent map could stand in only if reads never block
//! and removal were safe while readers run. `dashmap` takes a shard's
//! read lock on every `get` and hands out guards that block writers of that
//! shard; `RwLock<HashMap>` and `Mutex<HashMap>` block outright. The
//! benchmark compares all three against this table.

use crate::deletion::{Garbage, Guard, Participation, Reclaimer};
use crate::sync::{AtomicPtr, AtomicU64, Mutex, Ordering, StatU64, lock};

/// Tag of a slot never used: ends a probe chain.
pub const EMPTY: u64 = 0;
/// Tag of a slot whose entry was removed: not a hit, but the chain goes on.
pub const REMOVED: u64 = 1;
/// Tag of a slot holding an entry.
pub const FULL: u64 = 2;

// Small under loom, so that a model reaches a resize in a few inserts.
const MIN_SLOTS: usize = if cfg!(loom) { 4 } else { 16 };

struct Slot<V> {
    tag: AtomicU64,
    key: AtomicU64,
    val: AtomicPtr<V>,
}

/// One generation of the table's storage.
pub struct Table<V> {
    slots: Box<[Slot<V>]>,
    mask: usize,
}

impl<V> Table<V> {
    fn new(n: usize) -> Table<V> {
        let n = n.next_power_of_two().max(MIN_SLOTS);
        Table {
            slots: (0..n)
                .map(|_| Slot {
                    tag: AtomicU64::new(EMPTY),
                    key: AtomicU64::new(0),
                    val: AtomicPtr::new(std::ptr::null_mut()),
                })
                .collect(),
            mask: n - 1,
        }
    }

    fn home(&self, key: u64) -> usize {
        let h = (key ^ (key >> 29)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (h >> 32) as usize & self.mask
    }

    /// The slot holding `key` (full or removed), or the empty slot that
    /// ends its chain.
    fn find(&self, key: u64) -> (usize, u64) {
        let mut i = self.home(key);
        loop {
            let s = &self.slots[i];
            let tag = s.tag.load(Ordering::Acquire);
            if tag == EMPTY || s.key.load(Ordering::Relaxed) == key {
                return (i, tag);
            }
            i = (i + 1) & self.mask;
        }
    }
}

struct Counts {
    live: usize,
    used: usize,
}

/// A map from `u64` keys to owned values, read without locks. Values and
/// old tables are retired into the map's [`Reclaimer`].
pub struct Map<V: Send + 'static> {
    /// Unique in the process: which map a [`Memo`] was filled by.
    id: u64,
    cur: AtomicPtr<Table<V>>,
    write: Mutex<Counts>,
    contention: StatU64,
    rec: std::sync::Arc<Reclaimer>,
}

/// A look-up of [`Map::get_memo`] remembered for the next one: which map,
/// key and stamp, and the value's address (0: none). Plain numbers, so
/// that whatever holds one stays `Send`; it grants nothing by itself.
#[derive(Debug, Default, Clone, Copy)]
pub struct Memo {
    map: u64,
    key: u64,
    stamp: u64,
    val: usize,
}

impl Memo {
    /// The stamp read before the look-up that filled the memo (the
    /// reclaimer's stamp under which its value was found in the map).
    #[inline]
    #[cfg_attr(
        loom,
        allow(
            dead_code,
            reason = "its one caller, the cache's pinned look-up, is not in the loom build"
        )
    )]
    pub(crate) fn stamp(&self) -> u64 {
        self.stamp
    }
}

/// A value taken out of a [`Map`]: unreachable for lookups that start
/// from now on, but possibly still in use by readers inside their scopes.
/// It can be read, and it is retired (freed once no reader can hold it)
/// when dropped, or together with others as one set by
/// [`Unlinked::retire_set`]. It is never freed directly.
pub struct Unlinked<V: Send + 'static> {
    v: Option<Box<V>>,
    rec: std::sync::Arc<Reclaimer>,
}

impl<V: Send + 'static> std::ops::Deref for Unlinked<V> {
    type Target = V;
    fn deref(&self) -> &V {
        self.v.as_deref().expect("present until retired")
    }
}

impl<V: Send + 'static> Unlinked<V> {
    /// Retires `set` as one entry of the pending-deletion list, accounting
    /// `bytes` to it. Every value must come from maps of one reclaimer.
    pub fn retire_set(set: Vec<Unlinked<V>>, bytes: usize) {
        let Some(first) = set.first() else {
            return;
        };
        let rec = first.rec.clone();
        let items: Vec<Garbage> = set
            .into_iter()
            .map(|mut u| {
                assert!(
                    std::sync::Arc::ptr_eq(&u.rec, &rec),
                    "values of two reclaimers"
                );
                u.v.take().expect("present until retired") as Garbage
            })
            .collect();
        rec.retire(items, bytes);
    }
}

impl<V: Send + 'static> Drop for Unlinked<V> {
    fn drop(&mut self) {
        if let Some(v) = self.v.take() {
            self.rec.retire(vec![v as Garbage], 0);
        }
    }
}

// SAFETY: the map owns its values (boxed, handed between threads only as
// `&V` to readers and `Box<V>` to writers), so it is Send and Sync when V
// is Send and Sync.
unsafe impl<V: Send + Sync + 'static> Sync for Map<V> {}
// SAFETY: as above.
unsafe impl<V: Send + Sync + 'static> Send for Map<V> {}

impl<V: Send + 'static> Map<V> {
    /// An empty map whose readers synchronize with `rec`.
    pub fn new(rec: std::sync::Arc<Reclaimer>) -> Self {
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Map {
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            cur: AtomicPtr::new(Box::into_raw(Box::new(Table::new(MIN_SLOTS)))),
            write: Mutex::new(Counts { live: 0, used: 0 }),
            contention: StatU64::new(0),
            rec,
        }
    }

    /// The reclaimer readers must hold a guard of.
    pub fn reclaimer(&self) -> &std::sync::Arc<Reclaimer> {
        &self.rec
    }

    fn unlinked(&self, v: Box<V>) -> Unlinked<V> {
        Unlinked {
            v: Some(v),
            rec: self.rec.clone(),
        }
    }

    /// The value for `key`, alive for as long as `guard` (the thread stays
    /// between two synchronization points).
    #[inline]
    pub fn get<'g>(&'g self, key: u64, guard: &'g Guard<'_>) -> Option<&'g V> {
        assert!(guard.is_of(&self.rec), "a guard of another reclaimer");
        // SAFETY: `guard` is a scope of this map's reclaimer: the thread is
        // registered, not flagged out, and past no synchronization point
        // until the borrow ends.
        unsafe { self.get_unchecked(key) }
    }

    /// [`Map::get`], remembered in `memo` for the next look-up of `key`:
    /// while nothing has been retired since (the reclaimer's stamp has not
    /// moved), the next one returns the remembered value without probing
    /// the table. A value found by an earlier look-up, even in an earlier
    /// scope or on another thread, is then still alive for this scope.
    #[inline]
    pub fn get_memo<'g>(
        &'g self,
        key: u64,
        guard: &'g Guard<'_>,
        memo: &mut Memo,
    ) -> Option<&'g V> {
        self.memo_lookup::<false>(key, guard, memo)
    }

    /// The value `memo` remembers for `key`, without entering a scope:
    /// for a thread that runs the same code again and again (an applet on
    /// every message) and would otherwise enter a scope and reuse the memo
    /// each time. Returns it only where that scope's entry would have
    /// nothing to do and the memo would be reused: the reclaimer's stamp is
    /// the memo's, and `me` is flagged in and its last synchronization
    /// point saw that stamp ([`Reclaimer::is_current`]). `None` otherwise:
    /// the caller enters a scope and looks up as usual, which passes the
    /// synchronization point that frees what was retired meanwhile, so
    /// deletion is as prompt as with a scope per call.
    ///
    /// The value stays alive while `me` is borrowed: no synchronization
    /// point of this thread can pass, and the thread is counted in every
    /// retire (it is registered and flagged in).
    #[inline]
    pub fn get_pinned<'p>(
        &'p self,
        me: &'p mut Participation,
        key: u64,
        memo: &Memo,
    ) -> Option<&'p V> {
        if memo.val == 0
            || memo.map != self.id
            || memo.key != key
            || !self.rec.is_current(me, memo.stamp)
        {
            return None;
        }
        // SAFETY: `memo.val` is a value this map held under `key` when a
        // look-up inside a scope found it, after reading `memo.stamp`
        // (`Map::get_memo`, with `Acquire`). A value leaves the map by being
        // unlinked, and is freed only after a retire that stores a stamp
        // above `memo.stamp` (`Release`, after the unlink), once every
        // thread counted in that retire has passed a synchronization point
        // that saw the new stamp. This thread read the stamp just now and
        // found `memo.stamp`, and its last synchronization point saw the
        // same, so none of its synchronization points saw a later one (one
        // location's loads never go back), and it was counted in any such
        // retire: it is flagged in now, and a thread flagged out at that
        // retire, or registered after it, took the later stamp when it
        // flagged in or registered and would have seen it now. So the value
        // is alive until this thread's next synchronization point, which
        // the borrow of `me` (and `'p`) precedes. This is
        // `Map::get_memo`'s argument with the scope's guard replaced by the
        // borrow of the participation, the guard's only part that matters
        // for it.
        Some(unsafe { &*(memo.val as *const V) })
    }

    /// [`Map::get_memo`] with the stamp read after the look-up instead of
    /// before: wrong on purpose (a value unlinked and retired between the
    /// two would be reused after it is freed), so that the loom model can
    /// show it catches the difference.
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn get_memo_stamp_late<'g>(
        &'g self,
        key: u64,
        guard: &'g Guard<'_>,
        memo: &mut Memo,
    ) -> Option<&'g V> {
        self.memo_lookup::<true>(key, guard, memo)
    }

    #[inline(always)]
    fn memo_lookup<'g, const LATE: bool>(
        &'g self,
        key: u64,
        guard: &'g Guard<'_>,
        memo: &mut Memo,
    ) -> Option<&'g V> {
        assert!(guard.is_of(&self.rec), "a guard of another reclaimer");
        // Read before the look-up: a value retired after it was found
        // moves the stamp past this one.
        let stamp = self.rec.stamp();
        if memo.val != 0 && memo.map == self.id && memo.key == key && memo.stamp == stamp {
            // SAFETY: `memo.val` is a value this map held under `key` when a
            // look-up inside a scope found it, after reading `stamp`. A value
            // leaves the map by being unlinked, and is freed only after a
            // retire that stores a stamp above `stamp` (its Release store
            // follows the unlink, so a look-up after a read of that stamp
            // cannot find the value), once every thread counted in that
            // retire has passed a synchronization point that saw the new
            // stamp. This thread reads `stamp` again now, so none of its
            // synchronization points since saw a later one (one load of a
            // location never goes back), and it was counted in any such
            // retire: a thread flagged out or not registered then took the
            // later stamp when it flagged in or registered, and would see it
            // now. So the value is alive until this thread's next
            // synchronization point, which `guard` (and `'g`) precedes.
            return Some(unsafe { &*(memo.val as *const V) });
        }
        let v = self.get(key, guard);
        let stamp = if LATE { self.rec.stamp() } else { stamp };
        *memo = Memo {
            map: self.id,
            key,
            stamp,
            val: v.map_or(0, |v| core::ptr::from_ref(v) as usize),
        };
        v
    }

    /// [`Map::get`] without the guard's proof.
    ///
    /// # Safety
    /// The calling thread must be registered with the reclaimer this map
    /// retires into, not flagged out, and must not pass a synchronization
    /// point while it uses the result (it is inside a scope, e.g. running
    /// generated code entered from one).
    #[inline]
    pub unsafe fn get_unchecked(&self, key: u64) -> Option<&V> {
        let t = self.cur.load(Ordering::Acquire);
        // SAFETY: a table is retired only after `cur` moved past it, and
        // freed only when every thread counted at that retire has passed a
        // synchronization point; the caller has not passed one since it
        // could have loaded `t` (contract above).
        let t = unsafe { &*t };
        let (i, tag) = t.find(key);
        if tag != FULL {
            return None;
        }
        let v = t.slots[i].val.load(Ordering::Acquire);
        // (`Option<&V>` would turn a null here into `None`: the loom models
        // check that a full slot always shows its value.)
        #[cfg(loom)]
        assert!(!v.is_null(), "a full slot without its value");
        // SAFETY: the slot was full when its tag was read, so `v` is a live
        // value or one retired after that read, which outlives the caller's
        // current scope for the same reason as the table.
        Some(unsafe { &*v })
    }

    /// Publishes `value` under `key`. Returns the value it replaces, now
    /// unreachable for new lookups. May retire the old table after a resize.
    pub fn insert(&self, key: u64, value: Box<V>) -> Option<Unlinked<V>> {
        self.insert_raw(key, value).1
    }

    /// [`Map::insert`], and the value published, alive for as long as
    /// `guard` even if another thread replaces or removes it at once: a
    /// value is retired only after it is unreachable, and freed only when
    /// every thread counted at that retire has passed a synchronization
    /// point, which the guard's thread does not do while it is borrowed.
    pub fn insert_in<'g>(
        &'g self,
        key: u64,
        value: Box<V>,
        guard: &'g Guard<'_>,
    ) -> (&'g V, Option<Unlinked<V>>) {
        assert!(guard.is_of(&self.rec), "a guard of another reclaimer");
        let (v, old) = self.insert_raw(key, value);
        // SAFETY: `v` was made by `Box::into_raw` and published by
        // `insert_raw`; from then on only a writer that unlinks it retires
        // it, and the reclaimer frees it only after every thread counted
        // at that retire has passed a synchronization point. `guard` is a
        // scope of this map's reclaimer (asserted above), so this thread is
        // counted and passes none until the borrow ends.
        (unsafe { &*v }, old)
    }

    /// [`Map::insert`], with the published value's address.
    fn insert_raw(&self, key: u64, value: Box<V>) -> (*const V, Option<Unlinked<V>>) {
        let mut c = lock(&self.write, &self.contention);
        // Writers hold the lock: `cur` only changes under it.
        // SAFETY: the current table is never retired while we hold the lock.
        let mut t = unsafe { &*self.cur.load(Ordering::Acquire) };
        let (mut i, mut tag) = t.find(key);
        if tag == EMPTY && (c.used + 1) * 2 > t.slots.len() {
            t = self.resize(&mut c);
            (i, tag) = t.find(key);
        }
        let s = &t.slots[i];
        let v = Box::into_raw(value);
        match tag {
            FULL => {
                // Writers are serialized by the lock, so load-then-store
                // is the swap; readers see the old or the new pointer.
                let old = s.val.load(Ordering::Relaxed);
                s.val.store(v, Ordering::Release);
                // SAFETY: the slot owned `old` (made by Box::into_raw) and it
                // is no longer reachable through the table; `Unlinked` only
                // ever retires it, so readers that still hold it are safe.
                (v, Some(self.unlinked(unsafe { Box::from_raw(old) })))
            }
            REMOVED => {
                // Revived for the same key: value first, then the tag.
                s.val.store(v, Ordering::Relaxed);
                s.tag.store(FULL, Ordering::Release);
                c.live += 1;
                (v, None)
            }
            _ => {
                s.key.store(key, Ordering::Relaxed);
                s.val.store(v, Ordering::Relaxed);
                s.tag.store(FULL, Ordering::Release);
                c.live += 1;
                c.used += 1;
                (v, None)
            }
        }
    }

    /// Removes `key` if `pred` holds for its value; returns the value, now
    /// unreachable for new lookups.
    pub fn remove_if(&self, key: u64, pred: impl FnOnce(&V) -> bool) -> Option<Unlinked<V>> {
        let mut c = lock(&self.write, &self.contention);
        // SAFETY: as in `insert`.
        let t = unsafe { &*self.cur.load(Ordering::Acquire) };
        let (i, tag) = t.find(key);
        if tag != FULL {
            return None;
        }
        let s = &t.slots[i];
        let v = s.val.load(Ordering::Relaxed);
        // SAFETY: a full slot's value is live; only writers (holding the
        // lock) retire values.
        if !pred(unsafe { &*v }) {
            return None;
        }
        s.tag.store(REMOVED, Ordering::Release);
        c.live -= 1;
        // SAFETY: the slot owned `v`; it is now unreachable for lookups that
        // start after this store, and `Unlinked` only ever retires it.
        Some(self.unlinked(unsafe { Box::from_raw(v) }))
    }

    /// Removes `key`.
    pub fn remove(&self, key: u64) -> Option<Unlinked<V>> {
        self.remove_if(key, |_| true)
    }

    /// Calls `f` on every live value, under the writers' lock.
    pub fn for_each(&self, mut f: impl FnMut(u64, &V)) {
        let _c = lock(&self.write, &self.contention);
        // SAFETY: as in `insert`.
        let t = unsafe { &*self.cur.load(Ordering::Acquire) };
        for s in t.slots.iter() {
            if s.tag.load(Ordering::Relaxed) == FULL {
                // SAFETY: live while its slot is full and we hold the lock.
                f(s.key.load(Ordering::Relaxed), unsafe {
                    &*s.val.load(Ordering::Relaxed)
                });
            }
        }
    }

    fn resize<'a>(&'a self, c: &mut Counts) -> &'a Table<V> {
        let old = self.cur.load(Ordering::Acquire);
        // SAFETY: current table, caller holds the lock.
        let o = unsafe { &*old };
        let new = Table::new((c.live + 1) * 4);
        for s in o.slots.iter() {
            if s.tag.load(Ordering::Relaxed) == FULL {
                let key = s.key.load(Ordering::Relaxed);
                let (i, _) = new.find(key);
                let d = &new.slots[i];
                d.key.store(key, Ordering::Relaxed);
                d.val
                    .store(s.val.load(Ordering::Relaxed), Ordering::Relaxed);
                d.tag.store(FULL, Ordering::Relaxed);
            }
        }
        c.used = c.live;
        let new = Box::into_raw(Box::new(new));
        // Release: a reader that loads the new table sees its slots.
        self.cur.store(new, Ordering::Release);
        // SAFETY: `old` came from Box::into_raw and `cur` no longer points
        // at it; readers that loaded it are covered by the retire. Its
        // values now belong to the new table (a Table never drops values).
        let garbage: Garbage = Box::new(unsafe { Box::from_raw(old) });
        self.rec.retire(vec![garbage], 0);
        // SAFETY: just stored, and we hold the lock.
        unsafe { &*new }
    }

    /// Entries in the map.
    pub fn len(&self) -> usize {
        lock(&self.write, &self.contention).live
    }

    /// True when the map holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Slots of the current table (for the metadata figure).
    pub fn slots(&self) -> usize {
        let _c = lock(&self.write, &self.contention);
        // SAFETY: as in `insert`.
        unsafe { &*self.cur.load(Ordering::Acquire) }.slots.len()
    }

    /// Times a writer found the writers' lock held.
    pub fn contention(&self) -> u64 {
        self.contention.load(Ordering::Relaxed)
    }

    /// Bytes of one slot.
    pub const SLOT_BYTES: usize = std::mem::size_of::<Slot<V>>();
}

impl<V: Send + 'static> Drop for Map<V> {
    fn drop(&mut self) {
        let t = self.cur.load(Ordering::Relaxed);
        // SAFETY: we are the last owner: no reader or writer is left, and
        // `t` and every full slot's value came from Box::into_raw.
        unsafe {
            let t = Box::from_raw(t);
            for s in t.slots.iter() {
                if s.tag.load(Ordering::Relaxed) == FULL {
                    drop(Box::from_raw(s.val.load(Ordering::Relaxed)));
                }
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn removal_leaves_a_sentinel_that_keeps_the_chain_and_resize_drops_it() {
        let map = Map::new(Arc::new(Reclaimer::new()));
        let rec = map.reclaimer().clone();
        let mut me = rec.register();
        // Enough keys to collide in 16 slots, then remove some.
        for k in 0..7u64 {
            assert!(map.insert(k, Box::new(k)).is_none());
        }
        for k in [0, 2, 4] {
            assert_eq!(*map.remove(k).unwrap(), k);
        }
        {
            let g = rec.enter(&mut me);
            for k in 0..7u64 {
                assert_eq!(map.get(k, &g).copied(), (k % 2 == 1 || k > 4).then_some(k));
            }
        }
        // Re-adding a removed key revives its slot; more keys resize.
        assert!(map.insert(2, Box::new(20)).is_none());
        for k in 100..140u64 {
            assert!(map.insert(k, Box::new(k)).is_none());
        }
        assert!(map.slots() >= 64);
        let g = rec.enter(&mut me);
        assert_eq!(map.get(2, &g).copied(), Some(20));
        assert_eq!(map.get(0, &g), None);
        assert_eq!(map.len(), 4 + 1 + 40);
        drop(g);
        rec.unregister(&me);
        assert_eq!(rec.stats().pending_sets, 0);
    }

    #[test]
    fn a_remembered_lookup_follows_replacements_removals_and_its_key_and_map() {
        let map = Map::new(Arc::new(Reclaimer::new()));
        let rec = map.reclaimer().clone();
        let mut me = rec.register();
        assert!(map.insert(1, Box::new(10u64)).is_none());
        assert!(map.insert(2, Box::new(20u64)).is_none());
        let mut memo = Memo::default();
        let seen = |me: &mut crate::deletion::Participation, memo: &mut Memo, key: u64| {
            let g = rec.enter(me);
            map.get_memo(key, &g, memo).copied()
        };
        assert_eq!(seen(&mut me, &mut memo, 1), Some(10));
        // Reused while nothing was retired.
        let stamp = memo.stamp;
        assert_eq!(seen(&mut me, &mut memo, 1), Some(10));
        assert_eq!(memo.stamp, stamp);
        // Another key is looked up.
        assert_eq!(seen(&mut me, &mut memo, 2), Some(20));
        // A replacement retires the old value: the new one is found.
        drop(map.insert(2, Box::new(21u64)));
        assert_eq!(seen(&mut me, &mut memo, 2), Some(21));
        assert!(memo.stamp > stamp);
        // A removal: gone.
        drop(map.remove(2));
        assert_eq!(seen(&mut me, &mut memo, 2), None);
        // A memo of another map is not taken for this one's.
        let other = Map::new(rec.clone());
        assert!(other.insert(1, Box::new(99u64)).is_none());
        assert_eq!(seen(&mut me, &mut memo, 1), Some(10));
        {
            let g = rec.enter(&mut me);
            assert_eq!(other.get_memo(1, &g, &mut memo).copied(), Some(99));
        }
        rec.unregister(&me);
    }

    #[test]
    #[should_panic(expected = "another reclaimer")]
    fn a_guard_of_another_reclaimer_is_refused() {
        let map = Map::<u64>::new(Arc::new(Reclaimer::new()));
        let other = Reclaimer::new();
        let mut me = other.register();
        let g = other.enter(&mut me);
        let _ = map.get(1, &g);
    }
}
