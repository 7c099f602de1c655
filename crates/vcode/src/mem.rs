//! Executable memory, W^X: no page is ever writable and executable at once.
//!
//! The default allocator maps each chunk twice from one `memfd`: a
//! read-write view that `end` writes the code through, and a read-execute
//! view the code runs from. The two views are different pages of the
//! address space, so neither is ever both writable and executable, and
//! code already running from a chunk is never disturbed by a later
//! function being written into the same chunk. Where `memfd_create` is
//! refused, each function gets its own anonymous mapping that is written
//! and then turned read-execute with `mprotect` before anyone can run it.
//!
//! Other allocators (the shared code cache) plug in through
//! [`ExecMemory`]: `end_in` asks it for a block and writes the code
//! straight into the block's writable view, so code is copied once.
//!
//! This is one of the small modules that own `unsafe`.

use crate::error::ErrorKind;
use std::cell::RefCell;
use std::sync::Arc;

/// A place to put generated code: gives out blocks whose bytes are
/// written through one address and executed at another (or the same
/// address after a protection change).
///
/// # Safety
/// An implementation must return blocks whose `write` pointer is valid
/// for `len` bytes of writes until its owner's [`BlockOwner::seal`] is called, whose
/// `exec` address then holds exactly those bytes, executable and not
/// writable, for as long as the block lives, and which no other block
/// overlaps.
pub unsafe trait ExecMemory {
    /// A block of at least `len` bytes.
    fn alloc(&self, len: usize) -> Result<ExecBlock, ErrorKind>;
}

/// Something that keeps a block's memory alive and is told when it is
/// written and when it is given up.
pub trait BlockOwner: Send + Sync {
    /// Makes the block's bytes executable (no-op for dual mappings).
    fn seal(&self, exec: usize, len: usize) -> Result<(), ErrorKind>;

    /// Takes the block back when the [`ExecBlock`] is dropped, e.g. onto a
    /// code cache's free list. `write`, `exec` and `len` are the values the
    /// block was made with. The default does nothing: the owner's own drop
    /// releases the memory.
    ///
    /// An allocator that reuses the range must only do so when no thread
    /// can still be running code in it; a code cache drops blocks only
    /// after its deletion protocol has established that.
    fn release(&self, write: *mut u8, exec: usize, len: usize) {
        let _ = (write, exec, len);
    }
}

/// A block of executable memory holding one generated function. Dropping
/// it releases the memory to its allocator.
pub struct ExecBlock {
    write: *mut u8,
    exec: usize,
    len: usize,
    owner: Arc<dyn BlockOwner>,
}

// SAFETY: the block's memory is owned through `owner` (itself Send + Sync);
// after `seal` nobody writes through `write`, and before it only the
// thread holding the unique `&mut ExecBlock` does.
unsafe impl Send for ExecBlock {}
// SAFETY: shared access only reads `exec`/`len` and executes the code.
unsafe impl Sync for ExecBlock {}

impl ExecBlock {
    /// Makes a block.
    ///
    /// # Safety
    /// `write` must be valid for writes of `len` bytes that show at
    /// `exec` once `owner.seal` has run, and `owner` must keep both alive.
    pub unsafe fn new(write: *mut u8, exec: usize, len: usize, owner: Arc<dyn BlockOwner>) -> Self {
        ExecBlock {
            write,
            exec,
            len,
            owner,
        }
    }

    /// A block of a dual-mapped [`Chunk`]: `write` and `exec` are the same
    /// offset in its two views, so the bytes show at `exec` as soon as
    /// they are written (the chunk's `seal` is a no-op, and
    /// [`Slab::reserve`]'s blocks skip it).
    ///
    /// # Safety
    /// `at + len <= chunk.size`, and no other block overlaps that range.
    #[inline(always)]
    unsafe fn dual(chunk: &Arc<Chunk>, at: usize, len: usize) -> Self {
        ExecBlock {
            // SAFETY: `at + len <= size` (the caller's contract), so the
            // pointer stays within the write view.
            write: unsafe { chunk.rw.add(at) },
            exec: chunk.rx as usize + at,
            len,
            owner: chunk.clone(),
        }
    }

    /// Hands `f` the first `total` bytes of the block's writable view, for
    /// `end` to write a function straight into (no intermediate buffers),
    /// then seals the block: from here on it is only executed. An error
    /// if the block is smaller than `total` (a faulty [`ExecMemory`]) or
    /// sealing fails.
    #[inline(always)]
    pub(crate) fn fill_with<R>(
        &mut self,
        total: usize,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<R, ErrorKind> {
        if total > self.len {
            return Err(too_small(self.len, total));
        }
        // SAFETY: `write` is valid for `len >= total` bytes of writes
        // (the `ExecBlock::new` contract), the memory is mapped, hence
        // initialized, and nothing else reads or writes it before `seal`:
        // the block is not handed out before this returns, and `&mut self`
        // excludes any other access through it.
        let r = f(unsafe { std::slice::from_raw_parts_mut(self.write, total) });
        self.owner.seal(self.exec, self.len)?;
        Ok(r)
    }

    /// The address the code runs at.
    pub fn addr(&self) -> usize {
        self.exec
    }

    /// The block's length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty block.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The code bytes, read through the executable view.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: after `fill_with` the exec view is readable (PROT_READ is part
        // of both views) for `len` bytes while `owner` lives, and nothing
        // writes to it any more.
        unsafe { std::slice::from_raw_parts(self.exec as *const u8, self.len) }
    }
}

/// Copies `src` to the start of `dst`, with [`copy_small`]'s inline
/// copies for a short `src`. Panics if `dst` is shorter (callers size
/// `dst` from `src`).
#[inline(always)]
pub(crate) fn copy_to(dst: &mut [u8], src: &[u8]) {
    let dst = &mut dst[..src.len()];
    // SAFETY: `dst` is a distinct `&mut` slice of exactly `src.len()` bytes.
    unsafe { copy_small(src, dst.as_mut_ptr()) }
}

/// Copies `src`, at most 64 bytes (a frame's prologue or epilogue), to
/// the start of `dst` in at most four overlapping 16-byte copies, without
/// [`copy_to`]'s `memcpy` above 16 bytes or its byte loop below 4 (a
/// frame that saves nothing ends in `leave; ret`). The branches test the
/// longest lengths first, as a frame that saves registers has them.
/// Panics if `src` is longer or `dst` shorter (callers slice `src` out of
/// a 64-byte array).
#[inline(always)]
pub(crate) fn copy_short(dst: &mut [u8], src: &[u8]) {
    assert!(src.len() <= 64, "copy_short of {} bytes", src.len());
    let dst = &mut dst[..src.len()];
    let (n, s, d) = (src.len(), src.as_ptr(), dst.as_mut_ptr());
    // SAFETY: `dst` is a distinct `&mut` slice of exactly `n` bytes, and
    // every read is within `src` and every write within `dst`: each pair
    // of copies of `k` bytes starts at 0 and `n - k` with `k <= n` (and
    // the middle 16-byte pair at 16 and `n - 32` with `32 < n <= 64`),
    // unaligned and overlapping in the middle.
    unsafe {
        macro_rules! pair {
            ($t:ty, $k:expr) => {{
                let (a, b) = (
                    (s as *const $t).read_unaligned(),
                    (s.add(n - $k) as *const $t).read_unaligned(),
                );
                (d as *mut $t).write_unaligned(a);
                (d.add(n - $k) as *mut $t).write_unaligned(b);
            }};
        }
        if n > 16 {
            if n > 32 {
                let (a, b) = (
                    (s.add(16) as *const u128).read_unaligned(),
                    (s.add(n - 32) as *const u128).read_unaligned(),
                );
                (d.add(16) as *mut u128).write_unaligned(a);
                (d.add(n - 32) as *mut u128).write_unaligned(b);
            }
            pair!(u128, 16);
        } else if n >= 8 {
            pair!(u64, 8);
        } else if n >= 4 {
            pair!(u32, 4);
        } else if n >= 2 {
            pair!(u16, 2);
        } else if n == 1 {
            *d = *s;
        }
    }
}

#[cold]
fn too_small(len: usize, total: usize) -> ErrorKind {
    ErrorKind::Memory(format!("block of {len} bytes is too small for {total}"))
}

/// Copies `src` to `dst`: a prologue, an epilogue or a short body is a
/// few bytes, for which two overlapping word copies beat a `memcpy` call.
///
/// # Safety
///
/// `dst` is valid for `src.len()` bytes of writes and does not overlap `src`.
#[inline(always)]
unsafe fn copy_small(src: &[u8], dst: *mut u8) {
    let (n, s) = (src.len(), src.as_ptr());
    // SAFETY: every read is within `src` and every write within
    // `dst..dst + n` (the caller's contract); the word copies are
    // unaligned and overlap in the middle when `n` is not a multiple.
    unsafe {
        if n > 16 {
            std::ptr::copy_nonoverlapping(s, dst, n);
        } else if n >= 8 {
            let (a, b) = (
                (s as *const u64).read_unaligned(),
                (s.add(n - 8) as *const u64).read_unaligned(),
            );
            (dst as *mut u64).write_unaligned(a);
            (dst.add(n - 8) as *mut u64).write_unaligned(b);
        } else if n >= 4 {
            let (a, b) = (
                (s as *const u32).read_unaligned(),
                (s.add(n - 4) as *const u32).read_unaligned(),
            );
            (dst as *mut u32).write_unaligned(a);
            (dst.add(n - 4) as *mut u32).write_unaligned(b);
        } else {
            for i in 0..n {
                *dst.add(i) = *s.add(i);
            }
        }
    }
}

impl Drop for ExecBlock {
    fn drop(&mut self) {
        self.owner.release(self.write, self.exec, self.len);
    }
}

/// A memfd mapped twice.
struct Chunk {
    rw: *mut u8,
    rx: *mut u8,
    size: usize,
}

// SAFETY: the mappings are plain memory owned by the chunk; the raw
// pointers are only dereferenced by `ExecBlock::fill_with` on disjoint ranges.
unsafe impl Send for Chunk {}
// SAFETY: as above.
unsafe impl Sync for Chunk {}

impl Chunk {
    fn new(size: usize) -> Result<Chunk, ErrorKind> {
        let name = c"vcode";
        // SAFETY: plain system calls on values we own; each result is checked.
        unsafe {
            let fd = libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC);
            if fd < 0 {
                return Err(ErrorKind::Memory(format!(
                    "memfd_create: {}",
                    std::io::Error::last_os_error()
                )));
            }
            if libc::ftruncate(fd, size as libc::off_t) != 0 {
                let e = std::io::Error::last_os_error();
                libc::close(fd);
                return Err(ErrorKind::Memory(format!("ftruncate: {e}")));
            }
            let rw = libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            );
            if rw == libc::MAP_FAILED {
                let e = std::io::Error::last_os_error();
                libc::close(fd);
                return Err(ErrorKind::Memory(format!("mmap (write view): {e}")));
            }
            let rx = libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_EXEC,
                libc::MAP_SHARED,
                fd,
                0,
            );
            libc::close(fd);
            if rx == libc::MAP_FAILED {
                let e = std::io::Error::last_os_error();
                libc::munmap(rw, size);
                return Err(ErrorKind::Memory(format!("mmap (exec view): {e}")));
            }
            Ok(Chunk {
                rw: rw.cast(),
                rx: rx.cast(),
                size,
            })
        }
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        // SAFETY: both mappings were made by `Chunk::new` with `size`, and
        // the last block referring to them is gone (we are in the last Arc).
        unsafe {
            libc::munmap(self.rw.cast(), self.size);
            libc::munmap(self.rx.cast(), self.size);
        }
    }
}

impl BlockOwner for Chunk {
    fn seal(&self, _exec: usize, _len: usize) -> Result<(), ErrorKind> {
        Ok(())
    }
}

/// One `memfd` mapped twice, read-write and read-execute, for allocators
/// outside this crate (the shared code cache) that carve their own blocks
/// out of it. The pages are never writable and executable at one address.
/// Both views are unmapped when the `DualMap` is dropped.
pub struct DualMap(Chunk);

impl DualMap {
    /// Maps `size` bytes (rounded up to whole pages) twice.
    pub fn new(size: usize) -> Result<DualMap, ErrorKind> {
        Chunk::new(page_round(size.max(1))).map(DualMap)
    }

    /// The start of the writable (not executable) view.
    pub fn write_base(&self) -> *mut u8 {
        self.0.rw
    }

    /// The start of the executable (not writable) view.
    pub fn exec_base(&self) -> usize {
        self.0.rx as usize
    }

    /// The size of each view in bytes.
    pub fn size(&self) -> usize {
        self.0.size
    }
}

/// An anonymous mapping written first, then turned read-execute: the
/// fallback where `memfd_create` is not allowed.
struct Single {
    ptr: *mut u8,
    size: usize,
}

// SAFETY: owned plain memory, written only before sealing.
unsafe impl Send for Single {}
// SAFETY: as above.
unsafe impl Sync for Single {}

impl Single {
    fn new(size: usize) -> Result<Single, ErrorKind> {
        // SAFETY: an anonymous private mapping; checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(ErrorKind::Memory(format!(
                "mmap: {}",
                std::io::Error::last_os_error()
            )));
        }
        Ok(Single {
            ptr: p.cast(),
            size,
        })
    }
}

impl BlockOwner for Single {
    fn seal(&self, _exec: usize, _len: usize) -> Result<(), ErrorKind> {
        // SAFETY: our own mapping of `size` bytes; from here on it is never
        // written again, so dropping write permission is what we want.
        let r = unsafe {
            libc::mprotect(
                self.ptr.cast(),
                self.size,
                libc::PROT_READ | libc::PROT_EXEC,
            )
        };
        if r != 0 {
            return Err(ErrorKind::Memory(format!(
                "mprotect: {}",
                std::io::Error::last_os_error()
            )));
        }
        Ok(())
    }
}

impl Drop for Single {
    fn drop(&mut self) {
        // SAFETY: our own mapping; the block using it is gone.
        unsafe { libc::munmap(self.ptr.cast(), self.size) };
    }
}

const CHUNK: usize = 256 * 1024;
const ALIGN: usize = 16;

fn page_round(n: usize) -> usize {
    (n + 4095) & !4095
}

/// The default allocator: bump allocation in dual-mapped chunks, one
/// current chunk per thread. A chunk is unmapped when the last function
/// in it is dropped and the thread has moved on to a newer chunk.
#[derive(Default)]
pub struct Arena {
    cur: RefCell<Option<(Arc<Chunk>, usize)>>,
    no_memfd: std::cell::Cell<bool>,
}

impl Arena {
    /// An empty arena.
    pub fn new() -> Self {
        Arena::default()
    }
}

// SAFETY: blocks come from disjoint, ALIGN-aligned ranges of a chunk that
// the block keeps alive; the write view shows at the exec view because
// both map the same memfd pages; fallback blocks own their mapping and
// are sealed by `mprotect` before their address is handed out to callers.
unsafe impl ExecMemory for Arena {
    fn alloc(&self, len: usize) -> Result<ExecBlock, ErrorKind> {
        let len = len.max(1);
        if !self.no_memfd.get() {
            let mut cur = self.cur.borrow_mut();
            let fits = matches!(&*cur, Some((c, used)) if used + len <= c.size);
            if !fits {
                match Chunk::new(page_round(len.max(CHUNK))) {
                    Ok(c) => *cur = Some((Arc::new(c), 0)),
                    Err(_) => self.no_memfd.set(true),
                }
            }
            if let Some((chunk, used)) = cur.as_mut() {
                let at = *used;
                *used = (at + len + ALIGN - 1) & !(ALIGN - 1);
                // SAFETY: `at + len <= size` was checked above, the range is
                // handed out once (bump pointer), and `chunk` keeps both
                // views mapped for the block's lifetime.
                return Ok(unsafe { ExecBlock::dual(chunk, at, len) });
            }
        }
        let s = Single::new(page_round(len))?;
        let (ptr, size) = (s.ptr, s.size);
        // SAFETY: the mapping is `size >= len` bytes, written before `seal`
        // makes it executable at the same address.
        Ok(unsafe { ExecBlock::new(ptr, ptr as usize, len.min(size), Arc::new(s)) })
    }
}

thread_local! {
    static ARENA: Arena = Arena::new();
}

/// Allocates from the calling thread's default arena.
pub(crate) fn alloc_default(len: usize) -> Result<ExecBlock, ErrorKind> {
    ARENA.with(|a| a.alloc(len))
}

/// Bytes of a [`Slab`]'s run taken for one function
/// ([`Slab::reserve`]): written through `out`, run at `exec`.
pub(crate) struct Reserved<'a> {
    /// The writable view of the bytes.
    pub(crate) out: &'a mut [u8],
    /// The address they run at.
    pub(crate) exec: usize,
    chunk: &'a Arc<Chunk>,
    at: usize,
}

impl Reserved<'_> {
    /// The block of these bytes, once written.
    #[inline(always)]
    pub(crate) fn into_block(self) -> ExecBlock {
        // SAFETY: `Slab::reserve` checked `at + len <= size` and handed the
        // range out once.
        unsafe { ExecBlock::dual(self.chunk, self.at, self.out.len()) }
    }
}

/// Bytes a [`Slab`] takes from the thread's arena at a time.
const SLAB: usize = 16 * 1024;

impl Arena {
    /// Takes a run of at least `len` bytes of a memfd chunk for a
    /// [`Slab`]: `(chunk, start, end)`, or `None` where `memfd_create` is
    /// refused.
    fn take_run(&self, len: usize) -> Option<(Arc<Chunk>, usize, usize)> {
        if self.no_memfd.get() {
            return None;
        }
        let mut cur = self.cur.borrow_mut();
        let fits = matches!(&*cur, Some((c, used)) if used + len <= c.size);
        if !fits {
            match Chunk::new(page_round(len.max(CHUNK))) {
                Ok(c) => *cur = Some((Arc::new(c), 0)),
                Err(_) => {
                    self.no_memfd.set(true);
                    return None;
                }
            }
        }
        let (chunk, used) = cur.as_mut()?;
        // The rest of the chunk when that is less than a slab.
        let take = (chunk.size - *used).min(len.max(SLAB));
        let at = *used;
        *used += take;
        Some((chunk.clone(), at, at + take))
    }
}

/// The default executable memory as one backend sees it: a run of the
/// thread's arena (batch allocation), from which its functions are
/// bump-allocated without a thread-local lookup or a `RefCell`. The run's
/// unused rest is given up when the backend is dropped (at most [`SLAB`]
/// bytes); the chunk is unmapped when its last function is dropped, as
/// with the arena itself.
#[derive(Default)]
pub(crate) struct Slab {
    run: Option<(Arc<Chunk>, usize, usize)>,
}

impl Slab {
    /// A block of `len` bytes, from the run, the thread's arena, or (where
    /// `memfd_create` is refused) a mapping of its own.
    #[inline]
    pub(crate) fn alloc(&mut self, len: usize) -> Result<ExecBlock, ErrorKind> {
        let len = len.max(1);
        if let Some((chunk, at, end)) = &mut self.run
            && *at + len <= *end
        {
            let a = *at;
            *at = (a + len + ALIGN - 1) & !(ALIGN - 1);
            // SAFETY: `a + len <= end <= size`, the run was handed to
            // this slab alone by `take_run` and is bump-allocated once,
            // and `chunk` keeps both views mapped for the block's
            // lifetime (as in `Arena::alloc`).
            return Ok(unsafe { ExecBlock::dual(chunk, a, len) });
        }
        self.refill(len)
    }

    /// The common case of [`alloc`](Slab::alloc), inline: the next `len`
    /// (at least 1) bytes of the run, for `end` to write the code straight
    /// into before making the block ([`Reserved::into_block`]: the views
    /// are dual-mapped, so there is nothing to seal). When the run is
    /// exhausted (about every thirty functions of a hundred instructions)
    /// a fresh one is taken out of line and the bytes come from it, so a
    /// refill costs the run and nothing else. `None`, with nothing taken,
    /// only where there are no runs (`memfd_create` refused): the caller
    /// takes `alloc`'s path.
    #[inline(always)]
    pub(crate) fn reserve(&mut self, len: usize) -> Option<Reserved<'_>> {
        debug_assert!(len > 0, "a block of no bytes would share its address");
        let fits = matches!(&self.run, Some((_, at, end)) if *at + len <= *end);
        if !fits && !self.take_run(len) {
            return None;
        }
        let (chunk, at, end) = self.run.as_mut()?;
        debug_assert!(*at + len <= *end);
        let a = *at;
        *at = (a + len + ALIGN - 1) & !(ALIGN - 1);
        // SAFETY: `a + len <= end <= size` (it fitted, or `take_run` took a
        // run of at least `len` bytes), and the range was handed to this
        // slab alone by `Arena::take_run` and is bump-allocated once (as
        // in `alloc`), so the slice is valid, initialized (mapped) memory
        // that nothing else accesses.
        let out = unsafe { std::slice::from_raw_parts_mut(chunk.rw.add(a), len) };
        Some(Reserved {
            out,
            exec: chunk.rx as usize + a,
            chunk,
            at: a,
        })
    }

    /// Replaces the run with a fresh one of at least `len` bytes from the
    /// thread's arena (the old run's rest is given up); false, with no
    /// run, where `memfd_create` is refused.
    #[cold]
    #[inline(never)]
    fn take_run(&mut self, len: usize) -> bool {
        self.run = ARENA.with(|a| a.take_run(len));
        self.run.is_some()
    }

    #[cold]
    #[inline(never)]
    fn refill(&mut self, len: usize) -> Result<ExecBlock, ErrorKind> {
        if self.take_run(len) {
            self.alloc(len)
        } else {
            alloc_default(len)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `copy_to` and `copy_short` copy every length through each of
    /// their branches exactly: the bytes, and nothing past them.
    #[test]
    fn copy_to_copies_every_length_exactly() {
        let src: Vec<u8> = (0..100u8).map(|i| i.wrapping_mul(37) ^ 0x5a).collect();
        for n in 0..=100 {
            let mut dst = [0xeeu8; 104];
            copy_to(&mut dst, &src[..n]);
            assert_eq!(&dst[..n], &src[..n], "length {n}");
            assert!(dst[n..].iter().all(|&b| b == 0xee), "length {n}");
            if n <= 64 {
                let mut dst = [0xeeu8; 104];
                copy_short(&mut dst, &src[..n]);
                assert_eq!(&dst[..n], &src[..n], "short, length {n}");
                assert!(dst[n..].iter().all(|&b| b == 0xee), "short, length {n}");
            }
        }
    }

    fn wx_mappings() -> Vec<String> {
        crate::debug::wx_mappings().unwrap()
    }

    /// Writes `parts` one after the other into `b` and seals it.
    fn fill(b: &mut ExecBlock, parts: &[&[u8]]) -> Result<(), ErrorKind> {
        let total = parts.iter().map(|p| p.len()).sum();
        b.fill_with(total, |out| {
            let mut at = 0;
            for p in parts {
                copy_to(&mut out[at..], p);
                at += p.len();
            }
        })
    }

    #[test]
    fn blocks_run_and_no_page_is_writable_and_executable() {
        let arena = Arena::new();
        let mut blocks = Vec::new();
        for v in 0..100u8 {
            let mut b = arena.alloc(6).unwrap();
            fill(&mut b, &[&[0xb8, v, 0, 0, 0], &[0xc3]]).unwrap(); // mov eax, v; ret
            assert!(wx_mappings().is_empty(), "{:?}", wx_mappings());
            blocks.push(b);
        }
        for (v, b) in blocks.iter().enumerate() {
            // SAFETY: the block holds `mov eax, v; ret`, a valid function of this type.
            let f: extern "C" fn() -> i32 = unsafe { std::mem::transmute(b.addr()) };
            assert_eq!(f(), v as i32);
        }
    }

    #[test]
    fn large_blocks_get_their_own_chunk() {
        let arena = Arena::new();
        let mut code = vec![0x90u8; CHUNK * 2];
        code.extend_from_slice(&[0xb8, 7, 0, 0, 0, 0xc3]);
        let mut b = arena.alloc(code.len()).unwrap();
        fill(&mut b, &[&code]).unwrap();
        // SAFETY: a nop sled followed by `mov eax, 7; ret`.
        let f: extern "C" fn() -> i32 = unsafe { std::mem::transmute(b.addr()) };
        assert_eq!(f(), 7);
    }

    #[test]
    fn dropping_a_block_hands_it_back_to_its_owner() {
        struct Counting(std::sync::atomic::AtomicUsize);
        impl BlockOwner for Counting {
            fn seal(&self, _: usize, _: usize) -> Result<(), ErrorKind> {
                Ok(())
            }
            fn release(&self, _: *mut u8, exec: usize, len: usize) {
                assert_eq!((exec, len), (0x1000, 64));
                self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
        let owner = Arc::new(Counting(Default::default()));
        let mut buf = [0u8; 64];
        // SAFETY: never sealed or executed; `buf` outlives the block.
        let b = unsafe { ExecBlock::new(buf.as_mut_ptr(), 0x1000, 64, owner.clone()) };
        drop(b);
        assert_eq!(owner.0.load(std::sync::atomic::Ordering::Relaxed), 1);
        // DualMap: the two views show the same bytes.
        let m = DualMap::new(100).unwrap();
        assert_eq!(m.size(), 4096);
        // SAFETY: the write view is ours and 4096 bytes long.
        unsafe { *m.write_base().add(7) = 0xc3 };
        // SAFETY: the exec view is readable and maps the same pages.
        assert_eq!(unsafe { *((m.exec_base() + 7) as *const u8) }, 0xc3);
        assert!(wx_mappings().is_empty());
    }

    #[test]
    fn slab_blocks_are_disjoint_and_sealed() {
        let mut slab = Slab::default();
        let mut blocks = Vec::new();
        for n in [1usize, 7, 8, 9, 16, 17, 100, 5000, 20_000] {
            let mut b = slab.alloc(n).unwrap();
            let bytes: Vec<u8> = (0..n).map(|i| (i * 31 + n) as u8).collect();
            fill(&mut b, &[&bytes[..n / 2], &bytes[n / 2..]]).unwrap();
            assert_eq!(b.bytes(), &bytes[..]);
            blocks.push((b, bytes));
        }
        for (b, bytes) in &blocks {
            assert_eq!(b.bytes(), &bytes[..], "a later block overwrote this one");
        }
        assert!(wx_mappings().is_empty());
    }

    #[test]
    fn reserved_blocks_survive_refills_and_stay_disjoint() {
        let mut slab = Slab::default();
        let mut blocks = Vec::new();
        // Far more than a run, with a block larger than a run among them.
        for k in 0..200usize {
            let n = if k == 77 {
                SLAB + 100
            } else {
                1 + k * 37 % 700
            };
            let bytes: Vec<u8> = (0..n).map(|i| (i * 13 + k) as u8).collect();
            let r = slab.reserve(n).expect("memfd runs");
            copy_to(r.out, &bytes);
            blocks.push((r.into_block(), bytes));
        }
        for (b, bytes) in &blocks {
            assert_eq!(b.bytes(), &bytes[..], "a later block overwrote this one");
        }
        assert!(wx_mappings().is_empty());
    }

    #[test]
    fn overfilling_a_block_is_an_error() {
        let mut b = Arena::new().alloc(4).unwrap();
        assert!(fill(&mut b, &[&[0u8; 32]]).is_err());
    }
}
