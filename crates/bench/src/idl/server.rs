//! What every stub family calls and is called with: the file server's
//! trivial methods ([`Pfs`]), the method marker that brackets them for
//! callgrind ([`method`]), and the client interface the harness drives
//! ([`PfsClient`]).
//!
//! IDL4's Table 4 counts the stubs and the server loop, not the server's
//! own work, so every family's server stub calls its method through
//! [`method`]: callgrind dumps its counters on entering and on leaving it,
//! which splits a call into client-to-server (before), the method
//! (excluded), and server-to-client (after).

use super::wire::Error;

/// Bytes of the file the IOzone server holds (the paper's 64 kB).
pub const FILE_BYTES: usize = 64 * 1024;

/// Bytes of one IOzone read request (the paper's 4 KB).
pub const READ_BYTES: usize = 4096;

/// The method marker: runs the server's method. Callgrind's
/// `--dump-before` names it and `--dump-after` names [`idlb_method_body`]
/// (callgrind keeps one of the two for a function name); outside callgrind
/// it is two calls, the same for every family.
#[unsafe(no_mangle)]
#[inline(never)]
pub fn idlb_method(f: &mut dyn FnMut()) {
    idlb_method_body(f);
    // Distinct from the other markers (see `count::idlb_call`).
    std::hint::black_box(3u8);
}

/// The method itself, inside the marker.
#[unsafe(no_mangle)]
#[inline(never)]
pub fn idlb_method_body(f: &mut dyn FnMut()) {
    f();
    std::hint::black_box(4u8);
}

/// [`idlb_method`] under the name the stubs use.
#[inline(always)]
pub fn method(f: &mut dyn FnMut()) {
    idlb_method(f)
}

/// The file server's state and its methods, the same for every family;
/// each family's server stub calls them inside [`method`].
#[derive(Clone, Debug)]
pub struct Pfs {
    /// The file IOzone reads.
    pub file: Vec<u8>,
    /// What `pfs_write` received, folded (so that the data is read).
    pub written: u64,
    /// Calls served.
    pub calls: u64,
}

impl Default for Pfs {
    fn default() -> Self {
        Pfs::new()
    }
}

impl Pfs {
    /// A server holding the [`FILE_BYTES`]-byte test file.
    pub fn new() -> Pfs {
        Pfs {
            file: test_file(),
            written: 0,
            calls: 0,
        }
    }

    /// The null call.
    pub fn null(&mut self) {
        self.calls += 1;
    }

    /// `pfs_open`: the handle is a function of the arguments.
    pub fn open(&mut self, client: i32, fobj: i32, flags: i32, mode: i32, handle: &mut i32) -> i32 {
        self.calls += 1;
        *handle = open_handle(client, fobj, flags, mode);
        0
    }

    /// `pfs_write`: folds the data into [`Pfs::written`], advances `pos`
    /// by the element count, returns `len`.
    pub fn write(&mut self, handle: i32, pos: &mut i32, len: i32, data: &[i32]) -> i32 {
        self.calls += 1;
        let mut h = self.written ^ handle as u64;
        for &d in data {
            h = h.rotate_left(5) ^ d as u32 as u64;
        }
        self.written = h;
        *pos = pos.wrapping_add(data.len() as i32);
        len
    }

    /// How many entries `pfs_get_direntries` returns for `count`.
    pub fn direntries_len(count: i32) -> usize {
        count.clamp(0, 1 << 16) as usize
    }

    /// `pfs_get_direntries`: fills `out` (of [`Pfs::direntries_len`]
    /// elements) with `pos + i`, advances `pos`, returns the count.
    pub fn direntries(&mut self, handle: i32, pos: &mut i32, out: &mut [i32]) -> i32 {
        self.calls += 1;
        fill_direntries(handle, *pos, out);
        *pos = pos.wrapping_add(out.len() as i32);
        out.len() as i32
    }

    /// The bytes a read of `count` at `offset` returns (empty past the end
    /// or for a negative argument).
    pub fn read_span(&self, offset: i32, count: i32) -> &[u8] {
        let (Ok(off), Ok(n)) = (usize::try_from(offset), usize::try_from(count)) else {
            return &[];
        };
        let start = off.min(self.file.len());
        let end = start.saturating_add(n).min(self.file.len());
        &self.file[start..end]
    }
}

/// The handle `pfs_open` returns.
pub fn open_handle(client: i32, fobj: i32, flags: i32, mode: i32) -> i32 {
    client
        .wrapping_mul(31)
        .wrapping_add(fobj)
        .wrapping_mul(31)
        .wrapping_add(flags ^ mode)
}

/// The entries `pfs_get_direntries` returns from `pos`.
pub fn fill_direntries(handle: i32, pos: i32, out: &mut [i32]) {
    for (i, o) in out.iter_mut().enumerate() {
        *o = pos.wrapping_add(i as i32) ^ handle;
    }
}

/// The IOzone file: a fixed pseudo-random pattern.
pub fn test_file() -> Vec<u8> {
    let mut x: u32 = 0x9e37_79b9;
    (0..FILE_BYTES)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

/// The calls as the harness makes them, one implementation per stub
/// family; signatures are those of fastpath's generated stubs.
pub trait PfsClient {
    /// The family's name in the tables.
    fn name(&self) -> &'static str;
    /// The null call.
    fn null(&mut self) -> Result<(), Error>;
    /// `pfs_open`.
    fn pfs_open(
        &mut self,
        client: i32,
        fobj: i32,
        flags: i32,
        mode: i32,
        handle: &mut i32,
    ) -> Result<i32, Error>;
    /// `pfs_write`.
    fn pfs_write(
        &mut self,
        handle: i32,
        pos: &mut i32,
        len: i32,
        data: &[i32],
    ) -> Result<i32, Error>;
    /// `pfs_get_direntries`.
    fn pfs_get_direntries(
        &mut self,
        handle: i32,
        pos: &mut i32,
        count: i32,
        data: &mut Vec<i32>,
    ) -> Result<i32, Error>;
    /// IOzone's read: `count` bytes at `offset` into `data`.
    fn read(
        &mut self,
        handle: i32,
        offset: i32,
        count: i32,
        data: &mut Vec<u8>,
    ) -> Result<i32, Error>;
}

/// Calls every operation once through `c` and checks the results against
/// [`Pfs`]'s semantics.
pub fn check<C: PfsClient + ?Sized>(c: &mut C) -> Result<(), String> {
    let name = c.name();
    let fail = |what: &str, e: Error| format!("{name}: {what}: {e}");
    c.null().map_err(|e| fail("null", e))?;
    let mut h = 0;
    let r = c
        .pfs_open(3, 5, 7, 9, &mut h)
        .map_err(|e| fail("pfs_open", e))?;
    if (r, h) != (0, open_handle(3, 5, 7, 9)) {
        return Err(format!("{}: pfs_open returned ({r}, {h})", name));
    }
    let data: Vec<i32> = (0..37).map(|i| i * 1000 - 7).collect();
    let mut pos = 100;
    let r = c
        .pfs_write(h, &mut pos, 11, &data)
        .map_err(|e| fail("pfs_write", e))?;
    if (r, pos) != (11, 137) {
        return Err(format!("{}: pfs_write returned ({r}, pos {pos})", name));
    }
    let mut out = vec![99; 3];
    let mut pos = 40;
    let r = c
        .pfs_get_direntries(h, &mut pos, 21, &mut out)
        .map_err(|e| fail("pfs_get_direntries", e))?;
    let mut want = vec![0; 21];
    fill_direntries(h, 40, &mut want);
    if (r, pos, &out) != (21, 61, &want) {
        return Err(format!(
            "{}: pfs_get_direntries returned ({r}, pos {pos}, {} entries)",
            name,
            out.len()
        ));
    }
    let file = test_file();
    let mut buf = Vec::new();
    for off in [0, READ_BYTES as i32, (FILE_BYTES - 100) as i32] {
        let r = c
            .read(h, off, READ_BYTES as i32, &mut buf)
            .map_err(|e| fail("read", e))?;
        let o = off as usize;
        let want = &file[o..(o + READ_BYTES).min(FILE_BYTES)];
        if r as usize != want.len() || buf != want {
            return Err(format!(
                "{}: read at {off} returned {r} and {} bytes, not the file's",
                name,
                buf.len()
            ));
        }
    }
    Ok(())
}
