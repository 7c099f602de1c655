//! fastpath's generated C stubs as a family of the instruction counts.
//!
//! The stubs are `idl::gen_c`'s output for `peers/idl/pfs_bench.idl`, kept
//! in `src/idl/c/pfs_bench.{h,c}` (the test `generated_c_stubs_are_current`
//! fails if the generator's output changes; `FASTPATH_REGENERATE=1`
//! rewrites them), compiled by `build.rs` with the C runtime
//! (`crates/idl/c/idl_rt.c`) and `src/idl/c/loop.c`, the C twin of the Rust
//! stubs' [`FpLoop`](super::fastpath_family::FpLoop): a channel made by the
//! C runtime whose client call runs the generated dispatch in place, in one
//! thread. The server's functions are Rust (`extern "C"`), each calling the
//! file server's method inside the method marker as every family does, so
//! the callgrind cuts fall where they fall for the Rust stubs.
//!
//! [`CClient`] is the generated client stubs behind [`PfsClient`]: it
//! turns the C status into the suite's [`Error`] and copies out arrays
//! from the string area into the caller's `Vec` (what the Rust stubs'
//! `read_vec` does), so its counts compare with the Rust column's.

use std::ffi::{c_int, c_void};
use std::hint::black_box;
use std::ptr::NonNull;

use super::count::{Subject, TABLE4_INTS, call_op};
use super::server::{Pfs, PfsClient, method};
use super::wire::Error;

/// `idl_client`: the C runtime's channel, opaque here.
#[repr(C)]
pub struct IdlClient {
    _opaque: [u8; 0],
}

/// `idlb_c_loop` of `loop.c`, opaque here; its first member is its
/// channel, so a loop is an `idl_client *`.
#[repr(C)]
pub struct CLoop {
    _opaque: [u8; 0],
}

/// `pfs_impl`: the generated header's table of server functions.
#[repr(C)]
struct PfsImpl {
    pfs_open: unsafe extern "C" fn(*mut c_void, i32, i32, i32, i32, *mut i32, *mut i32) -> c_int,
    pfs_write:
        unsafe extern "C" fn(*mut c_void, i32, *mut i32, i32, i32, *const i32, *mut i32) -> c_int,
    pfs_get_direntries: unsafe extern "C" fn(
        *mut c_void,
        i32,
        *mut i32,
        i32,
        *mut i32,
        *mut i32,
        u32,
        *mut i32,
    ) -> c_int,
    null_call: unsafe extern "C" fn(*mut c_void) -> c_int,
    read:
        unsafe extern "C" fn(*mut c_void, i32, i32, i32, *mut i32, *mut u8, u32, *mut i32) -> c_int,
}

// The generated stubs (`src/idl/c/pfs_bench.h`) and the carrier
// (`src/idl/c/loop.c`), linked from build.rs's `idlb_c`.
unsafe extern "C" {
    fn pfs_open(
        c: *mut IdlClient,
        client: i32,
        fobj: i32,
        flags: i32,
        mode: i32,
        handle: *mut i32,
        ret: *mut i32,
    ) -> c_int;
    fn pfs_write(
        c: *mut IdlClient,
        handle: i32,
        pos: *mut i32,
        len: i32,
        data_size: i32,
        data: *const i32,
        ret: *mut i32,
    ) -> c_int;
    fn pfs_get_direntries(
        c: *mut IdlClient,
        handle: i32,
        pos: *mut i32,
        count: i32,
        data_size: *mut i32,
        data: *mut *mut i32,
        ret: *mut i32,
    ) -> c_int;
    fn pfs_null_call(c: *mut IdlClient) -> c_int;
    fn pfs_read(
        c: *mut IdlClient,
        handle: i32,
        offset: i32,
        count: i32,
        data_size: *mut i32,
        data: *mut *mut u8,
        ret: *mut i32,
    ) -> c_int;
    fn idlb_c_loop_call(c: *mut IdlClient, key: u16, request_len: u32, reply_len: u32) -> c_int;
    fn idlb_c_pfs_loop(
        impl_: *const PfsImpl,
        this: *mut c_void,
        capacity: u32,
        area: u32,
    ) -> *mut CLoop;
    fn idlb_c_empty_loop(
        method: unsafe extern "C" fn(*mut c_void),
        this: *mut c_void,
        capacity: u32,
        area: u32,
    ) -> *mut CLoop;
    fn idlb_c_loop_free(l: *mut CLoop);
}

// ---------------------------------------------------------------------
// The server: the file server behind the generated `pfs_impl` table.

/// The `self` of the table's functions: a [`Pfs`].
///
/// # Safety (of each function below)
///
/// `this` is the `Pfs` the loop was made with, alive and not otherwise
/// borrowed during the call; the pointers are the generated server stub's
/// (docs/idl.md, "Generated C"): into the received record, and for an out
/// array a room of `cap` elements in the string area.
unsafe extern "C" fn s_open(
    this: *mut c_void,
    client: i32,
    fobj: i32,
    flags: i32,
    mode: i32,
    handle: *mut i32,
    ret: *mut i32,
) -> c_int {
    // SAFETY: see above.
    let (pfs, handle, ret) = unsafe { (&mut *this.cast::<Pfs>(), &mut *handle, &mut *ret) };
    method(&mut || *ret = pfs.open(client, fobj, flags, mode, handle));
    0
}

unsafe extern "C" fn s_write(
    this: *mut c_void,
    handle: i32,
    pos: *mut i32,
    len: i32,
    data_size: i32,
    data: *const i32,
    ret: *mut i32,
) -> c_int {
    // SAFETY: see `s_open`; the stub checked the sequence's descriptor,
    // so `data` holds `data_size` elements.
    let (pfs, pos, ret, data) = unsafe {
        (
            &mut *this.cast::<Pfs>(),
            &mut *pos,
            &mut *ret,
            std::slice::from_raw_parts(data, data_size as usize),
        )
    };
    method(&mut || *ret = pfs.write(handle, pos, len, data));
    0
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn s_direntries(
    this: *mut c_void,
    handle: i32,
    pos: *mut i32,
    count: i32,
    data_size: *mut i32,
    data: *mut i32,
    cap: u32,
    ret: *mut i32,
) -> c_int {
    // SAFETY: see `s_open`.
    let (pfs, pos, ret, data_size) = unsafe {
        (
            &mut *this.cast::<Pfs>(),
            &mut *pos,
            &mut *ret,
            &mut *data_size,
        )
    };
    method(&mut || {
        let n = Pfs::direntries_len(count).min(cap as usize);
        // SAFETY: the room holds `cap >= n` elements.
        let room = unsafe { std::slice::from_raw_parts_mut(data, n) };
        *ret = pfs.direntries(handle, pos, room);
        *data_size = n as i32;
    });
    0
}

unsafe extern "C" fn s_null(this: *mut c_void) -> c_int {
    // SAFETY: see `s_open`.
    let pfs = unsafe { &mut *this.cast::<Pfs>() };
    method(&mut || pfs.null());
    0
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn s_read(
    this: *mut c_void,
    _handle: i32,
    offset: i32,
    count: i32,
    data_size: *mut i32,
    data: *mut u8,
    cap: u32,
    ret: *mut i32,
) -> c_int {
    // SAFETY: see `s_open`.
    let (pfs, ret, data_size) = unsafe { (&*this.cast::<Pfs>(), &mut *ret, &mut *data_size) };
    method(&mut || {
        let span = pfs.read_span(offset, count);
        let n = span.len().min(cap as usize);
        // SAFETY: the room holds `cap >= n` bytes.
        unsafe { std::ptr::copy_nonoverlapping(span.as_ptr(), data, n) };
        *ret = n as i32;
        *data_size = n as i32;
    });
    0
}

static PFS_IMPL: PfsImpl = PfsImpl {
    pfs_open: s_open,
    pfs_write: s_write,
    pfs_get_direntries: s_direntries,
    null_call: s_null,
    read: s_read,
};

/// The empty server's method (the baseline: the carrier alone).
unsafe extern "C" fn s_empty(_this: *mut c_void) {
    method(&mut || {});
}

// ---------------------------------------------------------------------
// The loops and the client.

/// A loop of `loop.c` and what its server borrows, freed together.
pub struct Loop {
    l: NonNull<CLoop>,
    /// The server's state, boxed so that its address (the table's `self`)
    /// stays put.
    _pfs: Option<Box<Pfs>>,
}

impl Loop {
    /// A loop serving pfs from a fresh [`Pfs`], with a `capacity`-byte
    /// message buffer and an `area`-byte string area.
    pub fn pfs(capacity: u32, area: u32) -> Result<Loop, String> {
        let mut pfs = Box::new(Pfs::new());
        let this: *mut Pfs = &mut *pfs;
        // SAFETY: `PFS_IMPL` is static; `this` points to the boxed `Pfs`,
        // which the loop keeps alive and nothing else borrows.
        let l = unsafe { idlb_c_pfs_loop(&PFS_IMPL, this.cast(), capacity, area) };
        let l = NonNull::new(l).ok_or("the C runtime could not make a channel")?;
        Ok(Loop { l, _pfs: Some(pfs) })
    }

    /// A loop whose server calls an empty method for every request.
    pub fn empty() -> Result<Loop, String> {
        // SAFETY: `s_empty` ignores its `self`.
        let l = unsafe { idlb_c_empty_loop(s_empty, std::ptr::null_mut(), 64, 64) };
        let l = NonNull::new(l).ok_or("the C runtime could not make a channel")?;
        Ok(Loop { l, _pfs: None })
    }

    /// The loop as the stubs' channel.
    #[inline(always)]
    fn client(&mut self) -> *mut IdlClient {
        self.l.as_ptr().cast()
    }

    /// The carrier's empty call: a request of no record, answered by the
    /// loop's server.
    #[inline(always)]
    pub fn empty_call(&mut self) -> c_int {
        // SAFETY: the loop is live; a request of no bytes.
        unsafe { idlb_c_loop_call(self.client(), 7, 0, 0) }
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        // SAFETY: made by `idlb_c_*_loop`, freed once; the server's state
        // is dropped after (field order).
        unsafe { idlb_c_loop_free(self.l.as_ptr()) };
    }
}

/// The generated C client stubs over a [`Loop`].
pub struct CClient {
    /// The carrier.
    pub l: Loop,
}

fn status(st: c_int) -> Result<(), Error> {
    if st == 0 {
        Ok(())
    } else if (1..=6).contains(&st) {
        Err(Error::Status(st as u16))
    } else {
        Err(Error::Transport(format!("the C runtime's error {st}")))
    }
}

/// Copies `n` elements at `p` (a reply's array in the string area) into
/// `out`.
///
/// # Safety
///
/// `p` points to `n` elements, as a C stub that returned `IDL_OK` gives.
#[inline(always)]
unsafe fn copy_out<T: Copy>(p: *const T, n: i32, out: &mut Vec<T>) {
    out.clear();
    if n > 0 {
        // SAFETY: the caller's promise.
        out.extend_from_slice(unsafe { std::slice::from_raw_parts(p, n as usize) });
    }
}

impl PfsClient for CClient {
    fn name(&self) -> &'static str {
        "C stubs"
    }

    fn null(&mut self) -> Result<(), Error> {
        // SAFETY: the loop is live (the stub's channel).
        status(unsafe { pfs_null_call(self.l.client()) })
    }

    fn pfs_open(
        &mut self,
        client: i32,
        fobj: i32,
        flags: i32,
        mode: i32,
        handle: &mut i32,
    ) -> Result<i32, Error> {
        let mut ret = 0;
        // SAFETY: the loop is live; the out pointers are ours.
        status(unsafe { pfs_open(self.l.client(), client, fobj, flags, mode, handle, &mut ret) })?;
        Ok(ret)
    }

    fn pfs_write(
        &mut self,
        handle: i32,
        pos: &mut i32,
        len: i32,
        data: &[i32],
    ) -> Result<i32, Error> {
        let n = i32::try_from(data.len())
            .map_err(|_| Error::Transport("more elements than an int counts".into()))?;
        let mut ret = 0;
        // SAFETY: the loop is live; `data` holds `n` elements.
        status(unsafe {
            pfs_write(
                self.l.client(),
                handle,
                pos,
                len,
                n,
                data.as_ptr(),
                &mut ret,
            )
        })?;
        Ok(ret)
    }

    fn pfs_get_direntries(
        &mut self,
        handle: i32,
        pos: &mut i32,
        count: i32,
        data: &mut Vec<i32>,
    ) -> Result<i32, Error> {
        let (mut n, mut p, mut ret) = (0, std::ptr::null_mut(), 0);
        // SAFETY: the loop is live; the out pointers are ours.
        status(unsafe {
            pfs_get_direntries(
                self.l.client(),
                handle,
                pos,
                count,
                &mut n,
                &mut p,
                &mut ret,
            )
        })?;
        // SAFETY: the stub returned `IDL_OK`: `p` holds `n` elements of
        // the string area, valid until the next call.
        unsafe { copy_out(p, n, data) };
        Ok(ret)
    }

    fn read(
        &mut self,
        handle: i32,
        offset: i32,
        count: i32,
        data: &mut Vec<u8>,
    ) -> Result<i32, Error> {
        let (mut n, mut p, mut ret) = (0, std::ptr::null_mut(), 0);
        // SAFETY: as `pfs_get_direntries`.
        status(unsafe {
            pfs_read(
                self.l.client(),
                handle,
                offset,
                count,
                &mut n,
                &mut p,
                &mut ret,
            )
        })?;
        // SAFETY: as `pfs_get_direntries`.
        unsafe { copy_out(p, n, data) };
        Ok(ret)
    }
}

/// The C stubs over the loopback for the counter.
pub struct CSubject {
    client: CClient,
    empty: Loop,
    data: Vec<i32>,
    out: Vec<i32>,
}

impl Subject for CSubject {
    fn name(&self) -> &'static str {
        self.client.name()
    }

    fn op(&mut self, op: usize) {
        let e = &mut self.empty;
        call_op(&mut self.client, op, &self.data, &mut self.out, &mut || {
            let _ = black_box(e.empty_call());
        });
    }
}

/// The C family for the counter: the generated C stubs over `loop.c`'s
/// carrier (8 KiB message buffer, 64 KiB string area, as the Rust stubs'
/// loopback); `None` if the C runtime could not make its channels.
pub fn count_subject() -> Option<Box<dyn Subject>> {
    Some(Box::new(CSubject {
        client: CClient {
            l: Loop::pfs(8192, 64 << 10).ok()?,
        },
        empty: Loop::empty().ok()?,
        data: (0..TABLE4_INTS as i32).collect(),
        out: Vec::with_capacity(TABLE4_INTS),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed C stubs are `idl::gen_c`'s output for
    /// `pfs_bench.idl` as the generator stands.
    #[test]
    fn generated_c_stubs_are_current() {
        let src = include_str!("../../peers/idl/pfs_bench.idl");
        let (h, c) = idl::gen_c::generate(&idl::parse(src).expect("pfs_bench.idl"), "pfs_bench");
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/idl/c");
        for (name, want) in [("pfs_bench.h", h), ("pfs_bench.c", c)] {
            let path = format!("{dir}/{name}");
            if std::env::var_os("FASTPATH_REGENERATE").is_some() {
                std::fs::write(&path, &want).expect("write");
            }
            let have = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(
                have == want,
                "{path} is stale: FASTPATH_REGENERATE=1 cargo test -p fastpath-bench generated_c_stubs"
            );
        }
    }

    #[test]
    fn c_stubs_over_the_loopback() {
        super::super::server::check(&mut CClient {
            l: Loop::pfs(8192, 64 << 10).unwrap(),
        })
        .unwrap();
    }

    /// A C stub's status reaches the caller: a write of more elements
    /// than the string area holds is refused before sending.
    #[test]
    fn c_stubs_refuse_what_does_not_fit() {
        let mut c = CClient {
            l: Loop::pfs(8192, 4096).unwrap(),
        };
        let mut pos = 0;
        let data = vec![0; 2000];
        assert!(matches!(
            c.pfs_write(1, &mut pos, 1, &data),
            Err(Error::Transport(_))
        ));
        assert_eq!(Loop::empty().unwrap().empty_call(), 0);
    }
}
