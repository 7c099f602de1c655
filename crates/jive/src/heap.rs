//! The applet heap: arrays and the applet object, with a budget and a mark
//! phase at the end of invocations (U-Net/SLE §3.1 left collection as future
//! work and suggested scope-based lifetimes; this is jive's answer).
//!
//! # The model
//!
//! - A reference is an `i32` handle: 0 is `null`, [`LENT`] (2) is the
//!   lent array's (below), an even `h > 2` names slot `h / 2 - 2`. Handles live in the same `i32` slots as ints, which
//!   keeps the interpreter's frames uniform; the verifier guarantees that
//!   code never forges one from an int.
//! - The heap keeps a **directory** beside its objects for the JIT: entry
//!   `h / 2` holds the object's data address and its length (entry 0, for
//!   `null`, has length 0; entry 1 is [`LENT`]'s). Entries are 16 bytes and handles even, so the
//!   entry of handle `h` is at `directory + 8 * h`: an array access is a
//!   scaled load of the length, one compare, one branch, a scaled load of
//!   the data address and the element access (see `docs/jive.md`).
//! - Every allocation is charged against a per-applet budget of bytes
//!   (element bytes plus a fixed [`OBJECT_OVERHEAD`]); exceeding it is a trap.
//! - **Roots** are the static fields and the applet object's fields of array
//!   type. Nothing else survives an invocation: when an invocation (or
//!   `<clinit>` and the constructor) ends, normally or by a trap, and it
//!   allocated, [`Heap::collect`] marks everything reachable from the roots
//!   and frees the rest. Arrays made in the constructor and stored in fields
//!   therefore persist; scratch arrays made during `doTx`/`doRx` are freed at
//!   its end; an array stored into a field is never freed while the field
//!   refers to it.
//! - No collection happens *during* an invocation (its frames hold untyped
//!   handles), so one invocation can use at most the whole budget.
//! - Freed slots are reused. A handle the host got back from an invocation
//!   (a method returning an array) is valid only until the next invocation
//!   unless a field refers to the array.
//! - Mutable access is of two kinds. **Element access** ([`Heap::get_mut`],
//!   an [`ObjectMut`] of slices) changes elements and never an object's
//!   identity: its elements stay where they are and as many. **Replacement**
//!   (a slot freed by [`Heap::collect`]; a new heap by `clone`) draws a new
//!   [`Heap::generation`]. So a host that looks the same array up on every
//!   message (U-Net/SLE's `RxBuf`) can keep where its elements are in a
//!   [`BytesView`] and check it with one compare of the generation and one
//!   of the handle ([`Heap::bytes_viewed`]).
//! - **The lent array.** Handle [`LENT`] names no slot: no allocation
//!   takes it, it is never charged, marked or freed. While a host lends
//!   an invocation bytes of its own ([`Heap::lend`], through
//!   [`crate::Applet::lend`]) its directory entry holds their address,
//!   their length, mask -1 and `bytes` 1, so that generated code's
//!   ordinary array code and the inline natives read it as any `byte[]`;
//!   the interpreter and the natives read it through
//!   [`Heap::bytes_read`] (never [`Heap::get_mut`]: the bytes may be
//!   another process's, which the applet must never write). When the
//!   lend ends ([`Heap::end_lend`]) the entry is an empty `byte[]` again
//!   (length 0: `arraylength` 0, every index traps), so that a handle the
//!   applet kept past the lend (which the verifier refuses where the host
//!   declared the parameter lent) reaches no byte until the next lend,
//!   whose bytes the one handle then names.

use crate::subset::Prim;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes charged per object in addition to its elements.
pub const OBJECT_OVERHEAD: u64 = 16;

/// A heap object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Object {
    /// `boolean[]` (elements are 0 or 1).
    Booleans(Vec<i8>),
    /// `byte[]`.
    Bytes(Vec<i8>),
    /// `short[]`.
    Shorts(Vec<i16>),
    /// `int[]`.
    Ints(Vec<i32>),
    /// The applet instance: its instance fields.
    Instance(Vec<i32>),
}

impl Object {
    fn cost(&self) -> u64 {
        OBJECT_OVERHEAD
            + match self {
                Object::Booleans(v) | Object::Bytes(v) => v.len() as u64,
                Object::Shorts(v) => 2 * v.len() as u64,
                Object::Ints(v) | Object::Instance(v) => 4 * v.len() as u64,
            }
    }
    /// Its elements, to change in place ([`Heap::get_mut`]).
    #[inline(always)]
    fn elements_mut(&mut self) -> ObjectMut<'_> {
        match self {
            Object::Booleans(v) => ObjectMut::Booleans(v),
            Object::Bytes(v) => ObjectMut::Bytes(v),
            Object::Shorts(v) => ObjectMut::Shorts(v),
            Object::Ints(v) => ObjectMut::Ints(v),
            Object::Instance(v) => ObjectMut::Instance(v),
        }
    }

    /// Array length, or `None` for the instance.
    pub fn array_len(&self) -> Option<usize> {
        match self {
            Object::Booleans(v) | Object::Bytes(v) => Some(v.len()),
            Object::Shorts(v) => Some(v.len()),
            Object::Ints(v) => Some(v.len()),
            Object::Instance(_) => None,
        }
    }
}

/// A heap object's elements, to change in place: what [`Heap::get_mut`]
/// gives. Slices, not the vectors, so that no holder can move, grow or
/// replace an object (its identity, which [`BytesView`]s and the
/// directory rely on): that is the heap's own business, and moves its
/// [`Heap::generation`] where a view could see it.
#[derive(Debug, PartialEq, Eq)]
pub enum ObjectMut<'a> {
    /// `boolean[]` (elements are 0 or 1).
    Booleans(&'a mut [i8]),
    /// `byte[]`.
    Bytes(&'a mut [i8]),
    /// `short[]`.
    Shorts(&'a mut [i16]),
    /// `int[]`.
    Ints(&'a mut [i32]),
    /// The applet instance: its instance fields.
    Instance(&'a mut [i32]),
}

impl ObjectMut<'_> {
    /// Array length, or `None` for the instance.
    pub fn array_len(&self) -> Option<usize> {
        match self {
            ObjectMut::Booleans(v) | ObjectMut::Bytes(v) => Some(v.len()),
            ObjectMut::Shorts(v) => Some(v.len()),
            ObjectMut::Ints(v) => Some(v.len()),
            ObjectMut::Instance(_) => None,
        }
    }
}

/// Where the elements of one `byte[]` of one heap were, and when: filled
/// by [`Heap::bytes_viewed`] and valid while the heap's
/// [`Heap::generation`] and the handle looked up are the ones it holds.
/// A default view matches nothing. Plain numbers: a view carries no
/// authority (a stale or foreign one only misses).
#[derive(Debug, Clone, Copy, Default)]
pub struct BytesView {
    /// The heap's generation when the view was filled (0: never; no
    /// generation is 0).
    generation: u64,
    /// The handle it was filled for.
    handle: i32,
    /// The array's elements: address (an integer, so that a view is
    /// `Send`) and length.
    data: usize,
    len: usize,
}

/// Draws a [`Heap::generation`]: never 0, never the same twice in the
/// process (2^64 draws), so that no other heap, and no earlier state of
/// this one, has it.
fn next_generation() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Why an allocation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutOfBudget {
    /// Bytes requested.
    pub requested: u64,
    /// Bytes in use.
    pub in_use: u64,
    /// The budget.
    pub limit: u64,
}

/// One directory entry (see the module docs): where an object's elements
/// are, how many there are, and whether they are bytes. The layout is read
/// by generated code: `data`, then one word of the element count (bits 0
/// to 31, [`DIR_LEN`]), what a `bastore` keeps (bits 32 to 39,
/// [`DIR_MASK`]), whether the elements are bytes (bits 40 to 47,
/// [`DIR_BYTES_SHIFT`]) and zero above.
///
/// The second word is one field, so that every write of an entry is two
/// whole words: generated code reads the word whole (the inline natives'
/// type and length test), and a read of 8 bytes that two stores of 4
/// wrote a moment before is not forwarded from the store buffer but
/// waits for both to reach the cache. The lend writes [`LENT`]'s entry
/// just before the invocation that reads it; written as a 4-byte `len` and
/// 4 bytes of the rest, each such read cost a stall no instruction count
/// shows (docs/benchmarks.md, "Store-forwarding stalls on the applet's
/// path").
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DirEntry {
    /// Address of element 0 (an integer, so that the heap stays `Send`).
    pub(crate) data: usize,
    /// `len`, `store_mask` and `bytes` ([`DirEntry::new`]).
    word: u64,
}

impl DirEntry {
    /// The entry of `len` elements at `data`: `store_mask` is what a
    /// `bastore` keeps of the value (`1` for `boolean[]`, `-1` otherwise),
    /// `bytes` 1 for a `byte[]` or `boolean[]` (the arrays a native's
    /// `byte[]` argument accepts), 0 for anything else (`null`, a free
    /// slot, the instance, `short[]`, `int[]`): an inline native checks it
    /// where the native checks the array's type
    /// ([`crate::InlineForm::PushBytes`]).
    #[inline(always)]
    const fn new(data: usize, len: i32, store_mask: i8, bytes: u8) -> DirEntry {
        DirEntry {
            data,
            word: len as u32 as u64
                | ((store_mask as u8 as u64) << 32)
                | ((bytes as u64) << DIR_BYTES_SHIFT),
        }
    }

    /// Number of elements (0 for `null`, a free slot and the instance).
    pub(crate) const fn len(&self) -> i32 {
        self.word as u32 as i32
    }

    /// What a `bastore` keeps of the value ([`DirEntry::new`]).
    #[cfg(test)]
    const fn store_mask(&self) -> i8 {
        (self.word >> 32) as u8 as i8
    }

    /// Whether the elements are bytes ([`DirEntry::new`]).
    #[cfg(test)]
    const fn bytes(&self) -> u8 {
        (self.word >> DIR_BYTES_SHIFT) as u8
    }

    const NULL: DirEntry = DirEntry::new(0, 0, -1, 0);

    /// [`LENT`]'s entry while nothing is lent: an empty `byte[]` (so that
    /// both engines, and the inline natives, see the same array: length
    /// 0). Its address is a dangling one, never read (every access is
    /// checked against the length first), never null.
    const NOT_LENT: DirEntry = DirEntry::new(core::mem::align_of::<u64>(), 0, -1, 1);

    fn of(obj: &mut Object) -> DirEntry {
        let (data, len, store_mask, bytes) = match obj {
            Object::Booleans(v) => (v.as_mut_ptr() as usize, v.len(), 1, 1),
            Object::Bytes(v) => (v.as_mut_ptr() as usize, v.len(), -1, 1),
            Object::Shorts(v) => (v.as_mut_ptr() as usize, v.len(), -1, 0),
            Object::Ints(v) => (v.as_mut_ptr() as usize, v.len(), -1, 0),
            Object::Instance(v) => (v.as_mut_ptr() as usize, 0, -1, 0),
        };
        DirEntry::new(data, len as i32, store_mask, bytes)
    }
}

/// Directory byte offsets, for generated code.
pub(crate) const DIR_DATA: i32 = 0;
/// Offset of [`DirEntry::len`] (the second word's low 4 bytes: x86-64 and
/// aarch64, the JIT's targets, are little-endian).
pub(crate) const DIR_LEN: i32 = 8;
/// Offset of the `store_mask` of [`DirEntry::new`] (one signed byte).
pub(crate) const DIR_MASK: i32 = 12;
/// The bit of the `bytes` of [`DirEntry::new`] in the entry's second word
/// (`len` in bits 0-31, the mask in 32-39, `bytes` in 40-47, zero above).
pub(crate) const DIR_BYTES_SHIFT: i32 = 40;

const _: () = assert!(core::mem::size_of::<DirEntry>() == 16);
const _: () = assert!(core::mem::offset_of!(DirEntry, word) == DIR_LEN as usize);
const _: () = assert!(DIR_MASK == DIR_LEN + 4);

/// The handle of the array a host lends an invocation ([`Heap::lend`]):
/// reserved in every heap, naming no slot (see the module docs).
pub const LENT: i32 = 2;

/// Directory entries before slot 0's: `null`'s and [`LENT`]'s.
const FIXED_ENTRIES: usize = 2;

fn handle_of(slot: usize) -> i32 {
    (2 * (slot + FIXED_ENTRIES)) as i32
}

/// The slot a handle names, if it is even and above [`LENT`].
#[inline(always)]
fn slot_of(handle: i32) -> Option<usize> {
    if handle > LENT && handle & 1 == 0 {
        Some(handle as usize / 2 - FIXED_ENTRIES)
    } else {
        None
    }
}

/// Why [`Heap::lend`] refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LendError {
    /// A lend is active already (an invocation of the same applet inside
    /// a lending one, or a lend never ended): one array is lent at a time,
    /// and a second would overwrite the first's entry under its reader.
    #[error("a byte[] is lent already: one lend at a time")]
    AlreadyLent,
    /// The bytes are more than a Java array can hold.
    #[error("{0} bytes are more than a byte[] can hold")]
    TooLong(usize),
}

/// The heap of one applet.
#[derive(Debug)]
pub struct Heap {
    slots: Vec<Option<Object>>,
    /// Entry `i + 2` describes slot `i`; entry 0 is `null`'s, entry 1
    /// [`LENT`]'s.
    dir: Vec<DirEntry>,
    free: Vec<u32>,
    in_use: u64,
    limit: u64,
    marks: Vec<bool>,
    allocated_since_collect: bool,
    /// Drawn anew ([`next_generation`]) whenever an object stops being
    /// where it was: a slot freed (by [`Heap::collect`]), or the heap
    /// copied (its copy draws its own). An allocation takes a free slot
    /// or a new one, so it leaves every live handle's object where it
    /// was and draws none. While it holds the value a [`BytesView`] was
    /// filled with, the view's handle names the same array, with its
    /// elements where they were ([`Heap::bytes_viewed`]).
    generation: u64,
    /// Whether a lend is active ([`Heap::lend`]); apart from the entry,
    /// which an empty lend leaves as it was.
    lending: bool,
}

impl Clone for Heap {
    fn clone(&self) -> Heap {
        // The directory holds addresses of this heap's elements: a copy
        // must describe its own.
        let mut h = Heap {
            slots: self.slots.clone(),
            dir: Vec::new(),
            free: self.free.clone(),
            in_use: self.in_use,
            limit: self.limit,
            marks: Vec::new(),
            allocated_since_collect: self.allocated_since_collect,
            generation: next_generation(),
            lending: false,
        };
        // A copy lends nothing: the lend is the original's invocation's.
        h.dir = [DirEntry::NULL, DirEntry::NOT_LENT]
            .into_iter()
            .chain(h.slots.iter_mut().map(|s| match s {
                Some(o) => DirEntry::of(o),
                None => DirEntry::NULL,
            }))
            .collect();
        h
    }
}

impl Heap {
    /// An empty heap with a budget of `limit` bytes.
    pub fn new(limit: u64) -> Heap {
        Heap {
            slots: Vec::new(),
            dir: vec![DirEntry::NULL, DirEntry::NOT_LENT],
            free: Vec::new(),
            in_use: 0,
            limit,
            marks: Vec::new(),
            allocated_since_collect: false,
            generation: next_generation(),
            lending: false,
        }
    }

    /// The heap's generation: it changes whenever an object may have
    /// stopped being where it was (see [`Heap::generation`]'s field), and
    /// no two heaps ever have the same.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Bytes in use (elements plus overhead).
    pub fn bytes_in_use(&self) -> u64 {
        self.in_use
    }

    /// Number of live objects.
    pub fn object_count(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Number of slots ever used (live or free); bounded by the budget.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Allocates an object and returns its handle.
    pub fn alloc(&mut self, obj: Object) -> Result<i32, OutOfBudget> {
        let cost = obj.cost();
        if self.in_use + cost > self.limit || self.slots.len() >= i32::MAX as usize - 1 {
            return Err(OutOfBudget {
                requested: cost,
                in_use: self.in_use,
                limit: self.limit,
            });
        }
        self.in_use += cost;
        self.allocated_since_collect = true;
        let mut obj = obj;
        let entry = DirEntry::of(&mut obj);
        let slot = match self.free.pop() {
            Some(s) => {
                self.slots[s as usize] = Some(obj);
                self.dir[s as usize + FIXED_ENTRIES] = entry;
                s as usize
            }
            None => {
                self.slots.push(Some(obj));
                self.dir.push(entry);
                self.slots.len() - 1
            }
        };
        Ok(handle_of(slot))
    }

    /// The directory's address (see the module docs). It moves when an
    /// allocation grows it, never during generated code between two
    /// allocations.
    pub(crate) fn directory(&self) -> *const DirEntry {
        self.dir.as_ptr()
    }

    /// Allocates a zeroed array of `len` elements (`len >= 0`).
    pub fn alloc_array(&mut self, elem: Prim, len: i32) -> Result<i32, OutOfBudget> {
        let n = len.max(0) as usize;
        let cost = OBJECT_OVERHEAD + elem.size() * n as u64;
        // Check before allocating the vector, so a huge request costs nothing.
        if self.in_use + cost > self.limit {
            return Err(OutOfBudget {
                requested: cost,
                in_use: self.in_use,
                limit: self.limit,
            });
        }
        self.alloc(match elem {
            Prim::Boolean => Object::Booleans(vec![0; n]),
            Prim::Byte => Object::Bytes(vec![0; n]),
            Prim::Short => Object::Shorts(vec![0; n]),
            Prim::Int => Object::Ints(vec![0; n]),
        })
    }

    /// The object behind a handle; `None` for null, a dangling handle and
    /// [`LENT`] (whose bytes [`Heap::bytes_read`] reads).
    #[inline(always)]
    pub fn get(&self, handle: i32) -> Option<&Object> {
        self.slots.get(slot_of(handle)?)?.as_ref()
    }

    /// The elements of the object behind a handle, to change in place
    /// (element access: the object stays where it is and as long); `None`
    /// for null, a dangling handle and [`LENT`] (never written).
    #[inline(always)]
    pub fn get_mut(&mut self, handle: i32) -> Option<ObjectMut<'_>> {
        Some(
            self.slots
                .get_mut(slot_of(handle)?)?
                .as_mut()?
                .elements_mut(),
        )
    }

    /// The `byte[]` behind `handle`, through `view`:
    /// where `view` was filled by this heap in its current generation for
    /// the same handle, its elements without a look-up (two compares);
    /// otherwise looked up, and `view` filled for the next call. `None`
    /// for null, a dangling handle or another kind of object (a
    /// `boolean[]` too).
    #[inline(always)]
    pub fn bytes_viewed(&mut self, view: &mut BytesView, handle: i32) -> Option<&mut [i8]> {
        if self.bytes_view_current(view, handle) {
            // SAFETY: `bytes_view_current` said the view is current.
            return Some(unsafe { self.bytes_of_view(view) });
        }
        self.bytes_fill(view, handle)
    }

    /// [`Heap::bytes_viewed`] where `view` is current, without the
    /// look-up: `None` where it is not (then `bytes_viewed` looks the
    /// handle up), so that a caller that takes the look-up out of line
    /// tests only the two compares on its common way, not the `Option`
    /// of a call's result.
    #[inline(always)]
    pub fn bytes_if_viewed(&mut self, view: &BytesView, handle: i32) -> Option<&mut [i8]> {
        if self.bytes_view_current(view, handle) {
            // SAFETY: `bytes_view_current` said the view is current.
            return Some(unsafe { self.bytes_of_view(view) });
        }
        None
    }

    /// Whether `view` was filled by this heap in its current generation
    /// for `handle` (see [`Heap::bytes_of_view`]).
    #[inline(always)]
    fn bytes_view_current(&self, view: &BytesView, handle: i32) -> bool {
        view.generation == self.generation && view.handle == handle
    }

    /// The elements `view` names, borrowed from this heap mutably.
    ///
    /// # Safety
    /// [`Heap::bytes_view_current`] said `view` is current for this heap.
    #[inline(always)]
    unsafe fn bytes_of_view(&mut self, view: &BytesView) -> &mut [i8] {
        // SAFETY: `view` was filled by `bytes_fill` of this heap (no
        // other heap, and no earlier state of this one, has had this
        // generation: `next_generation`) from the `Object::Bytes` at
        // the handle's slot, and no slot has been freed since (a free
        // draws a new generation). Nothing else replaces an object or
        // moves its elements: mutable access outside this module is
        // element access (`ObjectMut`, slices), and an allocation fills
        // a free slot or a new one. So the vector filled from is still in
        // that slot with its buffer at `data` and `len` elements (moving
        // the `Heap` moves no buffer). The slice borrows `self` mutably,
        // as `get_mut`'s would: it is the one reference to those elements.
        // The address is a vector's (`Vec::as_mut_ptr`), never null (a
        // dangling one for an empty array), which `from_raw_parts_mut`
        // requires anyway; said to the compiler too, so that a caller's
        // `Option` of the slice is not tested again for null (`unet`'s
        // `fill_rxbuf`: a test and a branch a message).
        unsafe {
            core::hint::assert_unchecked(view.data != 0);
            core::slice::from_raw_parts_mut(view.data as *mut i8, view.len)
        }
    }

    /// [`Heap::bytes_viewed`] on a miss: the look-up, and `view` filled
    /// (or emptied where the handle names no byte array).
    #[inline(never)]
    fn bytes_fill(&mut self, view: &mut BytesView, handle: i32) -> Option<&mut [i8]> {
        let generation = self.generation;
        match self.slots.get_mut(slot_of(handle)?)?.as_mut()? {
            Object::Bytes(v) => {
                *view = BytesView {
                    generation,
                    handle,
                    data: v.as_mut_ptr() as usize,
                    len: v.len(),
                };
                Some(v)
            }
            _ => {
                *view = BytesView::default();
                None
            }
        }
    }

    /// The elements of the `byte[]` or `boolean[]` behind a handle, to
    /// read: an array of the heap's, or the lent bytes behind [`LENT`]
    /// (none while nothing is lent). `None` for null, a dangling handle
    /// and other kinds of object.
    #[inline(always)]
    pub fn bytes_read(&self, handle: i32) -> Option<&[i8]> {
        // The slots' look-up first, so that an array of the heap's costs
        // what `get` does (inlined: unet's deferred transmission reads
        // its message here once per message); the lent array on its miss,
        // out of line. Safe by the lend's invariant, argued where its
        // bytes are read (`lent_bytes`): readable for the lent length
        // until the lend ends, empty after; the slice borrows the heap.
        match self.get(handle) {
            Some(Object::Bytes(v) | Object::Booleans(v)) => Some(v),
            Some(_) => None,
            None => self.lent_if(handle),
        }
    }

    /// [`Heap::bytes_read`]'s miss: the lent bytes if `handle` is
    /// [`LENT`].
    #[cold]
    #[inline(never)]
    fn lent_if(&self, handle: i32) -> Option<&[i8]> {
        (handle == LENT).then(|| self.lent_bytes())
    }

    /// The lent bytes ([`Heap::lend`]), empty while nothing is lent.
    #[inline]
    pub fn lent_bytes(&self) -> &[i8] {
        let e = self.dir[LENT as usize / 2];
        // SAFETY: the lend's invariant. While a lend lasts the entry is
        // what `lend` wrote: a non-null address (`NOT_LENT`'s for an empty
        // lend) whose `len` bytes `lend`'s caller keeps readable until
        // `end_lend` (for `Applet::lend`, the `Lend` guard, whose drop runs
        // it; a leaked guard keeps them for the heap's life), and nothing
        // in the process writes them through a Rust reference meanwhile.
        // When the lend ends the entry is `NOT_LENT` again (a dangling,
        // aligned, non-null address and length 0: an empty slice), so the
        // handle reaches no byte after it. The slice borrows the heap, so
        // `end_lend` (`&mut self`) cannot run while it lives.
        unsafe { core::slice::from_raw_parts(e.data as *const i8, e.len() as usize) }
    }

    /// [`LENT`]'s directory entry, to write: without the bounds test of
    /// an index, for [`Heap::lend`] and [`Heap::end_lend`], which a host
    /// makes per message.
    #[inline(always)]
    fn lent_entry(&mut self) -> &mut DirEntry {
        debug_assert!(self.dir.len() >= FIXED_ENTRIES);
        // SAFETY: the directory always holds its `FIXED_ENTRIES` first
        // entries (`null`'s and `LENT`'s): it is made with them (`new`,
        // `clone`), grows by `alloc`, and shrinks only by `collect`'s
        // pops of the trailing free slots' entries, one per slot popped
        // (`dir.len() == slots.len() + FIXED_ENTRIES`, `check_directory`).
        unsafe { self.dir.get_unchecked_mut(LENT as usize / 2) }
    }

    /// Whether a lend is active ([`Heap::lend`]).
    #[inline]
    pub fn is_lending(&self) -> bool {
        self.lending
    }

    /// Lends `len` bytes at `data` to the heap's code as the `byte[]`
    /// behind [`LENT`], until [`Heap::end_lend`]: two stores into its
    /// directory entry. Refused while a lend is active (a second would
    /// overwrite the first's entry under its reader) and for more bytes
    /// than a `byte[]` holds.
    ///
    /// # Safety
    /// Until [`Heap::end_lend`] runs (or, if it never runs, for the
    /// heap's life), `data` is valid for reads of `len` bytes (any address,
    /// even null, where `len` is 0), and nothing in this process writes
    /// them through a Rust reference. Their values may change meanwhile
    /// (another process's shared memory): readers take them as plain
    /// bytes, and nothing here assumes they stay. They do not overlap
    /// memory the heap's applet's natives write during the lend (an
    /// inline copy from the lent array into the host's area is a
    /// `copy_nonoverlapping`).
    #[inline(always)]
    pub unsafe fn lend(&mut self, data: *const u8, len: usize) -> Result<(), LendError> {
        // An empty lend takes `NOT_LENT`'s non-null address, so that no
        // reader (`lent_bytes`, a runtime call's copy of no bytes) is
        // given a null one.
        let data = match core::ptr::NonNull::new(data.cast_mut()) {
            Some(d) if len != 0 => d,
            // `NOT_LENT`'s address, `align_of::<u64>()`.
            _ => core::ptr::NonNull::<u64>::dangling().cast(),
        };
        // SAFETY: the caller's promise, for the same bytes (or none).
        unsafe { self.lend_nonnull(data, len) }
    }

    /// [`Heap::lend`] of bytes at an address known not to be null (a
    /// slice's, [`crate::Applet::lend_slice`]): the same checks and
    /// entry, without the choice of an address for an empty lend.
    ///
    /// # Safety
    /// As [`Heap::lend`]'s.
    #[inline(always)]
    pub unsafe fn lend_nonnull(
        &mut self,
        data: core::ptr::NonNull<u8>,
        len: usize,
    ) -> Result<(), LendError> {
        if self.is_lending() {
            return Err(LendError::AlreadyLent);
        }
        let Ok(n) = i32::try_from(len) else {
            return Err(LendError::TooLong(len));
        };
        *self.lent_entry() = DirEntry::new(data.as_ptr() as usize, n, -1, 1);
        self.lending = true;
        Ok(())
    }

    /// Ends the lend ([`Heap::lend`]): the entry of [`LENT`] is an empty
    /// `byte[]` again. Nothing happens where nothing is lent.
    #[inline(always)]
    pub fn end_lend(&mut self) {
        *self.lent_entry() = DirEntry::NOT_LENT;
        self.lending = false;
    }

    /// Whether anything was allocated since the last collection.
    pub fn needs_collect(&self) -> bool {
        self.allocated_since_collect
    }

    /// Marks everything reachable from `roots` and frees the rest. The
    /// applet's objects hold no references except the instance, whose
    /// reference-typed fields are given by `instance_ref_slots`.
    pub fn collect(&mut self, roots: impl IntoIterator<Item = i32>, instance_ref_slots: &[u16]) {
        self.marks.clear();
        self.marks.resize(self.slots.len(), false);
        let mut stack: Vec<i32> = roots.into_iter().collect();
        while let Some(h) = stack.pop() {
            let Some(i) = slot_of(h) else { continue };
            match (self.slots.get(i), self.marks.get_mut(i)) {
                (Some(Some(obj)), Some(mark)) if !*mark => {
                    *mark = true;
                    if let Object::Instance(fields) = obj {
                        stack.extend(
                            instance_ref_slots
                                .iter()
                                .filter_map(|&s| fields.get(usize::from(s)).copied()),
                        );
                    }
                }
                _ => {}
            }
        }
        let mut freed = false;
        for (i, slot) in self.slots.iter_mut().enumerate() {
            if !self.marks[i]
                && let Some(obj) = slot.take()
            {
                self.in_use -= obj.cost();
                self.free.push(i as u32);
                self.dir[i + FIXED_ENTRIES] = DirEntry::NULL;
                freed = true;
            }
        }
        if freed {
            // A freed slot's handle may name another object after the next
            // allocation: no view of this generation may match again.
            self.generation = next_generation();
        }
        // Trailing free slots are returned, so capacity tracks the live set.
        while matches!(self.slots.last(), Some(None)) {
            self.slots.pop();
            self.dir.pop();
        }
        let len = self.slots.len() as u32;
        self.free.retain(|&s| s < len);
        self.allocated_since_collect = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_and_forged_handles_resolve_to_nothing() {
        let mut h = Heap::new(1000);
        let a = h.alloc_array(Prim::Int, 3).unwrap();
        assert_eq!(a, 4, "the first slot's handle: 2 is the lent array's");
        assert!(h.get(0).is_none());
        assert!(h.get(-5).is_none());
        assert!(h.get(1).is_none());
        assert!(h.get(LENT).is_none());
        assert!(h.get(6).is_none());
        assert_eq!(h.get(a), Some(&Object::Ints(vec![0, 0, 0])));
    }

    /// The directory describes every live object where generated code
    /// looks for it (`8 * handle`), and nothing else.
    fn check_directory(h: &mut Heap) {
        assert_eq!(h.dir.len(), h.slots.len() + FIXED_ENTRIES);
        assert_eq!(h.dir[0], DirEntry::NULL);
        let lent = h.dir[LENT as usize / 2];
        if h.lending {
            let b = h.lent_bytes();
            assert_eq!(
                (lent.len(), lent.store_mask(), lent.bytes(), lent.word >> 48),
                (b.len() as i32, -1, 1, 0)
            );
            assert!(lent.data != 0);
        } else {
            assert_eq!(
                lent,
                DirEntry::NOT_LENT,
                "an empty byte[] while nothing is lent"
            );
        }
        for slot in 0..h.slots.len() {
            let handle = handle_of(slot);
            let entry = h.dir[handle as usize / 2];
            match h.slots[slot].as_mut() {
                Some(o) => assert_eq!(entry, DirEntry::of(o), "handle {handle}"),
                None => assert_eq!(entry, DirEntry::NULL, "handle {handle}"),
            }
        }
    }

    #[test]
    fn the_directory_follows_allocation_collection_and_clone() {
        let mut h = Heap::new(100_000);
        let b = h.alloc_array(Prim::Boolean, 3).unwrap();
        let x = h.alloc_array(Prim::Byte, 0).unwrap();
        let s = h.alloc_array(Prim::Short, 5).unwrap();
        let i = h.alloc_array(Prim::Int, 7).unwrap();
        check_directory(&mut h);
        assert_eq!(h.dir[b as usize / 2].store_mask(), 1);
        // Whether the elements are bytes, which an inline native checks
        // where the native checks the array's type.
        let bytes = |h: &Heap, a: i32| h.dir[a as usize / 2].bytes();
        assert_eq!(
            [
                bytes(&h, b),
                bytes(&h, x),
                bytes(&h, s),
                bytes(&h, i),
                bytes(&h, 0)
            ],
            [1, 1, 0, 0, 0]
        );
        assert_eq!(h.dir[s as usize / 2].len(), 5);
        assert_eq!(h.dir[i as usize / 2].len(), 7);
        // Freed slots (x in the middle, i at the end) read as null.
        h.collect([b, s], &[]);
        check_directory(&mut h);
        assert_eq!(h.dir.get(i as usize / 2), None);
        assert_eq!(h.dir[x as usize / 2], DirEntry::NULL);
        // A reused slot gets its new object's entry; a clone describes its own.
        assert_eq!(h.alloc_array(Prim::Int, 2).unwrap(), x);
        check_directory(&mut h);
        let mut c = h.clone();
        check_directory(&mut c);
        assert_ne!(c.dir[b as usize / 2].data, h.dir[b as usize / 2].data);
    }

    /// A view is found again (the same elements) while nothing was freed,
    /// whatever was allocated; a freed slot taken by a new array under
    /// the same handle, and a copy of the heap, each miss and find their
    /// own array.
    #[test]
    fn a_view_holds_until_a_free_or_a_copy() {
        let mut h = Heap::new(10_000);
        let a = h.alloc_array(Prim::Byte, 4).unwrap();
        let mut view = BytesView::default();
        let data = |b: Option<&mut [i8]>| b.map(|b| (b.as_ptr() as usize, b.len()));
        let first = data(h.bytes_viewed(&mut view, a)).expect("a byte array");
        assert_eq!(view.generation, h.generation, "the view filled");
        h.alloc_array(Prim::Int, 100).unwrap();
        assert_eq!(data(h.bytes_viewed(&mut view, a)), Some(first), "a hit");
        // A copy draws its own generation: the view misses there and
        // finds the copy's elements, not the original's.
        let mut copy = h.clone();
        let mut copied = view;
        let theirs = data(copy.bytes_viewed(&mut copied, a)).unwrap();
        assert_ne!(theirs.0, first.0, "the copy's own elements");
        assert_eq!(theirs.1, 4);
        // `a` freed, and a new array takes its slot: the same handle.
        let g = h.generation;
        h.collect([], &[]);
        assert_ne!(h.generation, g, "a free draws a generation");
        let b = h.alloc_array(Prim::Byte, 9).unwrap();
        assert_eq!(b, a, "the slot reused");
        let now = data(h.bytes_viewed(&mut view, b)).expect("the new array");
        assert_eq!(now.1, 9, "the new array, not the freed one");
        // A collection that frees nothing keeps the generation (and the
        // view); a handle of another kind fills an empty view.
        let g = h.generation;
        h.collect([b], &[]);
        assert_eq!(h.generation, g);
        assert_eq!(data(h.bytes_viewed(&mut view, b)), Some(now));
        let i = h.alloc_array(Prim::Int, 1).unwrap();
        assert_eq!(data(h.bytes_viewed(&mut view, i)), None);
        assert_eq!(view.generation, 0);
        assert_eq!(data(h.bytes_viewed(&mut view, 0)), None, "null");
    }

    /// The lent array's entry: the lent bytes during a lend, an empty
    /// `byte[]` before and after; never a slot's (allocation, collection
    /// and a copy leave it alone; the copy lends nothing); never charged;
    /// one lend at a time.
    #[test]
    fn the_lent_handle_is_reserved_and_reads_the_lent_bytes() {
        let mut h = Heap::new(100);
        check_directory(&mut h);
        assert_eq!(h.bytes_read(LENT), Some(&[][..]), "empty before a lend");
        let msg: [u8; 5] = [1, 2, 3, 0xfe, 5];
        // SAFETY: `msg` outlives the lend, ended below; nothing writes it.
        unsafe { h.lend(msg.as_ptr(), msg.len()) }.unwrap();
        assert!(h.is_lending());
        assert_eq!(h.bytes_read(LENT), Some(&[1, 2, 3, -2, 5][..]));
        assert_eq!(h.dir[1].data, msg.as_ptr() as usize);
        check_directory(&mut h);
        // Not charged, not a slot: the first allocation gets handle 4,
        // and the whole budget is the allocations'.
        let a = h
            .alloc_array(Prim::Byte, 100 - OBJECT_OVERHEAD as i32)
            .unwrap();
        assert_eq!(a, 4);
        assert_eq!(h.bytes_in_use(), 100);
        assert_eq!(h.object_count(), 1);
        assert!(h.get_mut(LENT).is_none(), "never written through the heap");
        // A second lend is refused, the first kept.
        let other = [9u8; 3];
        // SAFETY: refused: nothing is lent.
        let second = unsafe { h.lend(other.as_ptr(), 3) };
        assert_eq!(second, Err(LendError::AlreadyLent));
        assert_eq!(h.bytes_read(LENT).map(<[i8]>::len), Some(5));
        // A copy lends nothing; a collection (LENT among the roots, as a
        // static that kept it would be) leaves the entry as it was.
        let mut c = h.clone();
        assert!(!c.is_lending());
        check_directory(&mut c);
        h.collect([LENT], &[]);
        assert!(h.get(a).is_none(), "LENT reaches no slot");
        assert_eq!(h.bytes_read(LENT).map(<[i8]>::len), Some(5));
        check_directory(&mut h);
        h.end_lend();
        check_directory(&mut h);
        assert_eq!(h.bytes_read(LENT), Some(&[][..]), "empty after the lend");
        // An empty lend is a lend; more than a byte[] holds is refused.
        // SAFETY: no bytes are read (length 0).
        unsafe { h.lend(core::ptr::null(), 0) }.unwrap();
        assert!(h.is_lending());
        assert_eq!(h.bytes_read(LENT), Some(&[][..]));
        // SAFETY: refused.
        let second = unsafe { h.lend(msg.as_ptr(), 1) };
        assert_eq!(second, Err(LendError::AlreadyLent));
        h.end_lend();
        let too_long = i32::MAX as usize + 1;
        // SAFETY: refused before anything is read.
        let long = unsafe { h.lend(msg.as_ptr(), too_long) };
        assert_eq!(long, Err(LendError::TooLong(too_long)));
        assert!(!h.is_lending());
    }

    #[test]
    fn the_budget_counts_elements_and_overhead() {
        let mut h = Heap::new(100);
        h.alloc_array(Prim::Int, 10).unwrap(); // 56 bytes
        let e = h.alloc_array(Prim::Short, 20).unwrap_err(); // 56 more
        assert_eq!(
            e,
            OutOfBudget {
                requested: 56,
                in_use: 56,
                limit: 100
            }
        );
        assert!(h.alloc_array(Prim::Byte, i32::MAX).is_err());
    }

    #[test]
    fn collection_keeps_what_roots_reach_and_frees_the_rest() {
        let mut h = Heap::new(10_000);
        let kept = h.alloc_array(Prim::Byte, 8).unwrap();
        let garbage = h.alloc_array(Prim::Byte, 8).unwrap();
        let via_instance = h.alloc_array(Prim::Int, 1).unwrap();
        let inst = h.alloc(Object::Instance(vec![7, via_instance])).unwrap();
        h.collect([kept, inst, 0], &[1]);
        assert!(h.get(kept).is_some());
        assert!(h.get(garbage).is_none());
        assert!(h.get(via_instance).is_some());
        assert_eq!(h.object_count(), 3);
        // The freed slot is reused.
        assert_eq!(h.alloc_array(Prim::Int, 0).unwrap(), garbage);
    }
}
