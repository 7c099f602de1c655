//! Executable memory for the whole cache: dual-mapped chunks carved into
//! power-of-two blocks kept on free lists by size class (paper §9.2: a
//! shared cache cannot evict the neighbours of a hole on demand, so freed
//! space is reused through free lists of various sizes).
//!
//! W^X: every chunk is a [`vcode::mem::DualMap`], one `memfd` mapped
//! read-write at one address and read-execute at another. Code is written
//! only through the first (by `vcode`'s `end_in`, and by the link patcher),
//! run only from the second. No page is writable and executable at once.
//!
//! A request larger than [`CHUNK`] (the classifier of a table of
//! thousands of filters) gets a mapping of its own, rounded up to whole
//! pages, counted against the capacity like a chunk and unmapped when the
//! block is freed: large blocks are rare, and a free list of them would
//! hold address space that no other request fits.
//!
//! A chunk is one block of the largest class ([`CHUNK`]); a request of a
//! smaller class splits the smallest free block that fits into halves,
//! keeping one and putting the other on its list. Blocks are aligned to
//! their size, so every block of 64 bytes or more starts a cache line.
//! Halves are not merged again when both are free: like the paper's lists,
//! a freed block serves requests of its own class (or smaller), and the
//! capacity check counts mapped chunks, not the shape of free space.
//!
//! A request the capacity refuses first gives back every chunk whose
//! blocks are all on the free lists (unmapped, its blocks taken off the
//! lists), then is tried again. Without it, chunks split into classes no
//! later request uses held the capacity for good: once the mapped chunks
//! left less than a large block's size, every large request failed though
//! most of the mapped bytes were free (jive's random programs, each a
//! ~150 KiB block, failed from one class on to the end of the run). Only
//! the full path pays for the scan of the free lists.
//!
//! Reuse and cross-modifying code: a block comes back to the free lists
//! only after the deletion protocol has seen every counted thread pass a
//! synchronization point, so no thread is executing in it or can jump to
//! it. New code written into it is reached only through a later
//! publication in the table (a `Release` store that the reader's lookup
//! loads with `Acquire`) or a link patched after that publication. x86
//! keeps instruction fetch coherent with stores by physical address, so
//! the write through the other virtual alias is seen; what the SDM's
//! cross-modifying-code rule guards against, an executing processor that
//! already fetched the old bytes at that address, cannot happen here
//! because no thread has been in the block since it was unlinked.
//!
//! This is one of the small modules that own `unsafe`.

use crate::sync::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use vcode::ErrorKind;
use vcode::mem::{BlockOwner, DualMap, ExecBlock, ExecMemory};

/// Smallest block: one cache line.
pub const MIN_BLOCK: usize = 64;
/// Largest block, and the size of each mapped chunk.
pub const CHUNK: usize = 64 * 1024;
/// Number of size classes (64 B to 64 KiB).
pub const CLASSES: usize = (CHUNK / MIN_BLOCK).trailing_zeros() as usize + 1;

/// The size class of a request, or `None` if it is larger than [`CHUNK`].
pub fn class_of(len: usize) -> Option<usize> {
    if len > CHUNK {
        return None;
    }
    let size = len.max(MIN_BLOCK).next_power_of_two();
    Some((size / MIN_BLOCK).trailing_zeros() as usize)
}

/// The block size of class `c`.
pub fn class_size(c: usize) -> usize {
    MIN_BLOCK << c
}

/// Why an allocation failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AllocError {
    /// Every chunk the capacity allows is mapped and no free block fits
    /// (after the chunks that were wholly free were given back).
    #[error(
        "the code cache is full: {mapped} of {capacity} bytes mapped ({free} of them free), \
         no free block of {size} bytes"
    )]
    Full {
        /// The configured capacity.
        capacity: usize,
        /// Bytes mapped when the request failed (chunks and large blocks).
        mapped: usize,
        /// Bytes of those on the free lists (in blocks too small, or in
        /// chunks with a block in use).
        free: usize,
        /// The block size asked for.
        size: usize,
    },
    /// The operating system refused a mapping.
    #[error("mapping executable memory: {0}")]
    Map(String),
}

struct State {
    chunks: Vec<DualMap>,
    /// Blocks larger than a chunk, each its own mapping, by write address.
    large: std::collections::HashMap<usize, DualMap>,
    /// Free blocks per class, as (write address, exec address).
    free: Vec<Vec<(usize, usize)>>,
    mapped: usize,
    live: usize,
}

pub(crate) struct Inner {
    capacity: usize,
    state: Mutex<State>,
    contention: AtomicU64,
    allocs: AtomicU64,
}

/// Counters of an [`Arena`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ArenaStats {
    /// Bytes of mapped chunks (each mapped twice; counted once).
    pub mapped: usize,
    /// Bytes in blocks handed out and not yet returned.
    pub live: usize,
    /// Bytes on the free lists (`mapped - live`).
    pub free: usize,
    /// Blocks handed out so far.
    pub allocs: u64,
    /// Times a thread found the free-list lock held.
    pub contention: u64,
}

/// The cache's executable memory.
#[derive(Clone)]
pub struct Arena {
    inner: Arc<Inner>,
}

impl Arena {
    /// An arena that maps at most `capacity` bytes (rounded down to whole
    /// chunks, at least one).
    pub fn new(capacity: usize) -> Arena {
        Arena {
            inner: Arc::new(Inner {
                capacity: (capacity / CHUNK).max(1) * CHUNK,
                state: Mutex::new(State {
                    chunks: Vec::new(),
                    large: std::collections::HashMap::new(),
                    free: vec![Vec::new(); CLASSES],
                    mapped: 0,
                    live: 0,
                }),
                contention: AtomicU64::new(0),
                allocs: AtomicU64::new(0),
            }),
        }
    }

    /// The capacity in bytes.
    pub fn capacity(&self) -> usize {
        self.inner.capacity
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner.lock()
    }

    /// A block of at least `len` bytes: (write address, exec address, size).
    fn take(&self, len: usize) -> Result<(usize, usize, usize), AllocError> {
        let Some(c) = class_of(len) else {
            return self.take_large(len);
        };
        let mut st = self.lock();
        let from = match (c..CLASSES).find(|&k| !st.free[k].is_empty()) {
            Some(k) => k,
            None => {
                if st.mapped + CHUNK > self.inner.capacity {
                    st.unmap_free_chunks();
                    if st.mapped + CHUNK > self.inner.capacity {
                        return Err(st.full(self.inner.capacity, class_size(c)));
                    }
                }
                let m = DualMap::new(CHUNK).map_err(|e| AllocError::Map(e.to_string()))?;
                let blk = (m.write_base() as usize, m.exec_base());
                st.chunks.push(m);
                st.mapped += CHUNK;
                st.free[CLASSES - 1].push(blk);
                CLASSES - 1
            }
        };
        let (w, x) = st.free[from].pop().expect("non-empty list");
        for k in (c..from).rev() {
            let half = class_size(k);
            st.free[k].push((w + half, x + half));
        }
        st.live += class_size(c);
        self.inner.allocs.fetch_add(1, Ordering::Relaxed);
        Ok((w, x, class_size(c)))
    }

    /// A block larger than a chunk: a mapping of its own.
    fn take_large(&self, len: usize) -> Result<(usize, usize, usize), AllocError> {
        let mut st = self.lock();
        // Page-rounded, as DualMap maps it.
        let size = len.div_ceil(4096) * 4096;
        if st.mapped + size > self.inner.capacity {
            st.unmap_free_chunks();
            if st.mapped + size > self.inner.capacity {
                return Err(st.full(self.inner.capacity, size));
            }
        }
        let m = DualMap::new(size).map_err(|e| AllocError::Map(e.to_string()))?;
        let size = m.size();
        let (w, x) = (m.write_base() as usize, m.exec_base());
        st.large.insert(w, m);
        st.mapped += size;
        st.live += size;
        self.inner.allocs.fetch_add(1, Ordering::Relaxed);
        Ok((w, x, size))
    }

    /// A raw block for code the cache writes itself (link sites, the
    /// resolver trampoline).
    pub(crate) fn raw(&self, len: usize) -> Result<RawBlock, AllocError> {
        let (w, x, size) = self.take(len)?;
        Ok(RawBlock {
            write: w,
            exec: x,
            len: size,
            arena: self.inner.clone(),
        })
    }

    /// The current counters.
    pub fn stats(&self) -> ArenaStats {
        let st = self.lock();
        ArenaStats {
            mapped: st.mapped,
            live: st.live,
            free: st.free_bytes(),
            allocs: self.inner.allocs.load(Ordering::Relaxed),
            contention: self.inner.contention.load(Ordering::Relaxed),
        }
    }

    /// The number of free blocks of each class, smallest class first.
    pub fn free_by_class(&self) -> Vec<usize> {
        let st = self.lock();
        st.free.iter().map(|l| l.len()).collect()
    }
}

impl State {
    fn free_bytes(&self) -> usize {
        self.free
            .iter()
            .enumerate()
            .map(|(c, l)| l.len() * class_size(c))
            .sum()
    }

    fn full(&self, capacity: usize, size: usize) -> AllocError {
        AllocError::Full {
            capacity,
            mapped: self.mapped,
            free: self.free_bytes(),
            size,
        }
    }

    /// Unmaps every chunk whose blocks are all on the free lists, taking
    /// them off the lists. A block on a free list was
    /// given back (after the deletion protocol, for code), so no thread
    /// runs in it or can jump to it: that is what lets it be reused, and
    /// it lets the chunk go as well.
    fn unmap_free_chunks(&mut self) {
        // Chunks by write address, with the free bytes found in each.
        let mut by_addr: Vec<(usize, usize, usize)> = self
            .chunks
            .iter()
            .enumerate()
            .map(|(i, m)| (m.write_base() as usize, i, 0))
            .collect();
        by_addr.sort_unstable();
        let chunk_of = |by_addr: &[(usize, usize, usize)], w: usize| {
            let i = by_addr.partition_point(|&(base, _, _)| base <= w);
            (i > 0 && w < by_addr[i - 1].0 + CHUNK).then(|| i - 1)
        };
        // Each free block's chunk (its place in `by_addr`), list after
        // list in the lists' order, found once: the lists are taken off
        // below in the same order.
        let mut owners = Vec::with_capacity(self.free.iter().map(Vec::len).sum());
        for (c, list) in self.free.iter().enumerate() {
            for &(w, _) in list {
                let i = chunk_of(&by_addr, w).expect("a free block lies in a chunk");
                by_addr[i].2 += class_size(c);
                owners.push(i);
            }
        }
        let idle: Vec<usize> = by_addr
            .iter()
            .filter(|&&(_, _, free)| free == CHUNK)
            .map(|&(_, i, _)| i)
            .collect();
        if idle.is_empty() {
            return;
        }
        // `retain` visits each block once, in order: the blocks `owners`
        // was filled from.
        let mut owner = owners.into_iter();
        for list in &mut self.free {
            list.retain(|_| {
                let i = owner.next().expect("a chunk for every free block");
                by_addr[i].2 != CHUNK
            });
        }
        let mut gone = vec![false; self.chunks.len()];
        for &i in &idle {
            gone[i] = true;
        }
        let mut i = 0;
        // Dropping a `DualMap` unmaps both views.
        self.chunks.retain(|_| {
            i += 1;
            !gone[i - 1]
        });
        self.mapped -= idle.len() * CHUNK;
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        match self.state.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {
                self.contention.fetch_add(1, Ordering::Relaxed);
                self.state.lock().unwrap_or_else(|p| p.into_inner())
            }
        }
    }

    fn give_back(&self, write: usize, exec: usize, len: usize) {
        let mut st = self.lock();
        if let Some(m) = st.large.remove(&write) {
            // A large block: unmapped (on drop, after the lock).
            st.mapped -= m.size();
            st.live -= m.size();
            drop(st);
            drop(m);
            return;
        }
        let c = class_of(len).expect("a block of this arena");
        debug_assert_eq!(class_size(c), len);
        st.free[c].push((write, exec));
        st.live -= len;
    }
}

impl BlockOwner for Inner {
    fn seal(&self, _exec: usize, _len: usize) -> Result<(), ErrorKind> {
        // Dual mapping: the bytes written through the write view already
        // show at the exec view.
        Ok(())
    }

    fn release(&self, write: *mut u8, exec: usize, len: usize) {
        self.give_back(write as usize, exec, len);
    }
}

// SAFETY: blocks are disjoint (each free-list entry is handed out once and
// comes back only through `release`), size-aligned ranges of a mapped
// chunk; `write` is the read-write view of the very pages that show at
// `exec` read-execute (one memfd, two mappings), valid for the block's size;
// the chunk stays mapped as long as the `Inner` each block holds an `Arc` of,
// and while any of its blocks is handed out (`unmap_free_chunks` unmaps only
// a chunk whose blocks are all on the free lists, and takes them off).
unsafe impl ExecMemory for Arena {
    fn alloc(&self, len: usize) -> Result<ExecBlock, ErrorKind> {
        let (w, x, size) = self
            .take(len)
            .map_err(|e| ErrorKind::Memory(e.to_string()))?;
        // SAFETY: see the impl's safety comment: `w` is writable for `size`
        // bytes that show at `x`, kept mapped by the owner.
        Ok(unsafe { ExecBlock::new(w as *mut u8, x, size, self.inner.clone()) })
    }
}

/// A block the cache writes itself. Returned to the free lists on drop.
pub(crate) struct RawBlock {
    write: usize,
    exec: usize,
    len: usize,
    arena: Arc<Inner>,
}

impl RawBlock {
    /// The address the code runs at.
    pub(crate) fn exec(&self) -> usize {
        self.exec
    }

    /// Copies `bytes` to offset `at` through the write view.
    pub(crate) fn write(&mut self, at: usize, bytes: &[u8]) {
        assert!(at + bytes.len() <= self.len, "write past the block");
        // SAFETY: `write..write+len` is this block's writable view (handed
        // out once by `take`), and `at + bytes.len() <= len`; the caller
        // writes only bytes no thread is executing yet.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), (self.write + at) as *mut u8, bytes.len())
        };
    }

    /// Stores `v` at offset `at` (4-aligned) with one atomic 4-byte store
    /// through the write view: how a live jump is repatched.
    pub(crate) fn store_u32(&self, at: usize, v: u32) {
        assert!(
            at.is_multiple_of(4) && at + 4 <= self.len,
            "misaligned patch"
        );
        // SAFETY: the address is inside this block's writable view, 4-byte
        // aligned (blocks are 64-aligned and `at` is a multiple of 4), and
        // every access to these 4 bytes through this view is atomic (this
        // function is the only writer after `write` set up the block).
        let a = unsafe { std::sync::atomic::AtomicU32::from_ptr((self.write + at) as *mut u32) };
        a.store(v, std::sync::atomic::Ordering::Release);
    }
}

impl Drop for RawBlock {
    fn drop(&mut self) {
        self.arena.give_back(self.write, self.exec, self.len);
    }
}

/// A page of code the cache writes once, outside the arena's capacity and
/// free lists (the resolver trampoline): written through its write view,
/// run from its exec view.
pub(crate) struct CodePage {
    map: DualMap,
}

impl CodePage {
    pub(crate) fn new(code: &[u8]) -> Result<CodePage, AllocError> {
        let map = DualMap::new(code.len()).map_err(|e| AllocError::Map(e.to_string()))?;
        assert!(code.len() <= map.size());
        // SAFETY: the write view is ours, `size >= code.len()` bytes, and no
        // thread can run the page before its address is returned.
        unsafe { std::ptr::copy_nonoverlapping(code.as_ptr(), map.write_base(), code.len()) };
        Ok(CodePage { map })
    }

    pub(crate) fn exec(&self) -> usize {
        self.map.exec_base()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_powers_of_two_from_a_cache_line_to_a_chunk() {
        assert_eq!(class_of(1), Some(0));
        assert_eq!(class_of(64), Some(0));
        assert_eq!(class_of(65), Some(1));
        assert_eq!(class_of(CHUNK), Some(CLASSES - 1));
        assert_eq!(class_of(CHUNK + 1), None);
        assert_eq!(class_size(CLASSES - 1), CHUNK);
    }

    #[test]
    fn splitting_and_reuse_keep_every_byte_accounted() {
        let a = Arena::new(2 * CHUNK);
        let b1 = a.raw(100).unwrap(); // 128: splits 64K into 32K,16K,..,128,128
        assert_eq!(b1.len, 128);
        assert_eq!(b1.exec % 128, 0);
        let s = a.stats();
        assert_eq!((s.mapped, s.live, s.free), (CHUNK, 128, CHUNK - 128));
        let b2 = a.raw(60).unwrap(); // 64: splits the free 128
        let b3 = a.raw(60).unwrap(); // the other 64
        assert_eq!(a.stats().live, 256);
        let x3 = b3.exec;
        drop(b3);
        let b4 = a.raw(10).unwrap(); // reused from the 64 list
        assert_eq!(b4.exec, x3);
        drop((b1, b2, b4));
        let s = a.stats();
        assert_eq!((s.live, s.free), (0, CHUNK));
    }

    #[test]
    fn capacity_is_a_hard_limit() {
        let a = Arena::new(CHUNK);
        let big = a.raw(CHUNK).unwrap();
        assert!(matches!(a.raw(64), Err(AllocError::Full { .. })));
        assert!(matches!(a.raw(CHUNK + 1), Err(AllocError::Full { .. })));
        drop(big);
        assert!(a.raw(64).is_ok());
        assert_eq!(a.stats().mapped, CHUNK);
    }

    #[test]
    fn a_block_larger_than_a_chunk_is_its_own_mapping_and_is_unmapped() {
        let a = Arena::new(8 * CHUNK);
        let small = a.raw(64).unwrap();
        let big = a.raw(3 * CHUNK + 100).unwrap();
        assert_eq!(big.len, 3 * CHUNK + 4096);
        assert_eq!(big.exec() % 4096, 0);
        let s = a.stats();
        assert_eq!((s.mapped, s.live), (CHUNK + big.len, 64 + big.len));
        // Capacity counts it: 8 chunks minus 1 minus 3 and a page leave 3.
        assert!(matches!(a.raw(4 * CHUNK), Err(AllocError::Full { .. })));
        let fits = a.raw(3 * CHUNK).unwrap();
        drop((big, fits));
        let s = a.stats();
        assert_eq!((s.mapped, s.live), (CHUNK, 64));
        drop(small);
        assert_eq!(a.stats().live, 0);
    }

    /// The pattern of jive's random programs: small blocks fill the
    /// capacity for a while, all are freed, then a large block is asked
    /// for. Every mapped byte is free, so it must fit; before the free
    /// chunks were given back, it failed, and every later one too.
    #[test]
    fn a_large_request_gets_the_chunks_that_are_wholly_free() {
        let a = Arena::new(8 * CHUNK);
        let small: Vec<_> = (0..16).map(|_| a.raw(CHUNK / 2).unwrap()).collect();
        assert_eq!(a.stats().mapped, 8 * CHUNK);
        drop(small);
        assert_eq!(a.stats().free, 8 * CHUNK);
        let big = a.raw(2 * CHUNK + 100).unwrap();
        assert_eq!(big.len, 2 * CHUNK + 4096);
        let s = a.stats();
        // Every chunk was wholly free, so every chunk went.
        assert_eq!((s.mapped, s.live, s.free), (big.len, big.len, 0));
        drop(big);
        for _ in 0..3 {
            // Small blocks beside large ones, freed in turn, go on fitting.
            let small: Vec<_> = (0..8).map(|_| a.raw(CHUNK / 2).unwrap()).collect();
            let big = a.raw(3 * CHUNK).unwrap();
            assert!(a.stats().mapped <= 8 * CHUNK);
            drop((small, big));
        }
        let s = a.stats();
        assert_eq!(s.live, 0);
        assert_eq!(s.free, s.mapped);
    }

    /// The same for a whole chunk's block after every chunk was split
    /// into halves that are all free again.
    #[test]
    fn a_chunk_sized_request_gets_a_chunk_whose_halves_are_free() {
        let a = Arena::new(2 * CHUNK);
        let halves: Vec<_> = (0..4).map(|_| a.raw(CHUNK / 2).unwrap()).collect();
        drop(halves);
        assert_eq!(a.free_by_class()[CLASSES - 2], 4);
        let whole = a.raw(CHUNK).unwrap();
        assert_eq!(whole.len, CHUNK);
        let s = a.stats();
        assert_eq!((s.mapped, s.live, s.free), (CHUNK, CHUNK, 0));
        assert_eq!(a.free_by_class(), vec![0; CLASSES]);
    }

    /// A chunk with one block in use stays mapped, and the block stays
    /// usable; the error says what is mapped and free.
    #[test]
    fn a_chunk_with_a_block_in_use_is_kept() {
        let a = Arena::new(2 * CHUNK);
        let mut kept = a.raw(64).unwrap();
        let other = a.raw(CHUNK).unwrap();
        drop(other);
        let Err(err) = a.raw(2 * CHUNK) else {
            panic!("two chunks fit beside a chunk in use")
        };
        assert_eq!(
            err,
            AllocError::Full {
                capacity: 2 * CHUNK,
                mapped: CHUNK,
                free: CHUNK - 64,
                size: 2 * CHUNK,
            }
        );
        assert!(
            err.to_string()
                .contains("65536 of 131072 bytes mapped (65472 of them free)")
        );
        kept.write(0, &[0xc3; 64]);
        let big = a.raw(CHUNK).unwrap();
        assert_eq!(a.stats().mapped, 2 * CHUNK);
        drop((big, kept));
    }
}
