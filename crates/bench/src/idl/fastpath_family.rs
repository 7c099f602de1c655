//! fastpath's generated stubs as a family of the suite, and the dynamic
//! stubs (`idl::dynamic`) beside them.
//!
//! The stubs are `idl::gen_rust`'s output for `peers/idl/pfs_bench.idl`
//! (the paper's three pfs calls as `crates/idl/idl/pfs.idl` declares them,
//! then the null call and IOzone's read), kept in `generated_pfs.rs`; the
//! test `generated_stubs_are_current` fails if the generator's output
//! changes (`FASTPATH_REGENERATE=1` rewrites the file).
//!
//! [`FpLoop`] is the loopback carrier for the counter: one message buffer,
//! one string area and the server's private scratch, a
//! [`ClientTransport`] whose `call` runs the server's dispatch directly on
//! the same memory seen as a [`ServerTransport`].

use std::hint::black_box;
use std::ops::Range;
use std::ptr::NonNull;

use idl::rt::shm::{ClientEnd, ServerEnd};
use idl::rt::{CallError, ClientTransport, OutSeq, Request, ServerTransport, Status};

use super::count::{Subject, TABLE4_INTS, call_op};
use super::server::{Pfs, PfsClient, method};
use super::wire::{AlignedBuf, Error};

/// The generated module (`idl::gen_rust` of `peers/idl/pfs_bench.idl`).
#[allow(missing_docs, clippy::all)]
pub mod generated {
    include!("generated_pfs.rs");
}

use generated::pfs;

/// Whether the generated stubs are part of this build.
pub fn available() -> bool {
    true
}

/// The file server behind the generated `Server` trait.
#[derive(Default)]
pub struct FpServer {
    /// The file server.
    pub pfs: Pfs,
}

impl pfs::Server for FpServer {
    fn pfs_open(&mut self, client: i32, fobj: i32, flags: i32, mode: i32, handle: &mut i32) -> i32 {
        let mut ret = 0;
        let pfs = &mut self.pfs;
        method(&mut || ret = pfs.open(client, fobj, flags, mode, handle));
        ret
    }

    fn pfs_write(&mut self, handle: i32, pos: &mut i32, len: i32, data: &[i32]) -> i32 {
        let mut ret = 0;
        let pfs = &mut self.pfs;
        method(&mut || ret = pfs.write(handle, pos, len, data));
        ret
    }

    fn pfs_get_direntries(
        &mut self,
        handle: i32,
        pos: &mut i32,
        count: i32,
        data: &mut OutSeq<'_, i32>,
    ) -> i32 {
        let mut ret = 0;
        let pfs = &mut self.pfs;
        method(&mut || {
            let n = Pfs::direntries_len(count).min(data.capacity());
            let room = &mut data.spare()[..n];
            ret = pfs.direntries(handle, pos, room);
            let _ = data.advance(n);
        });
        ret
    }

    fn null_call(&mut self) {
        let pfs = &mut self.pfs;
        method(&mut || pfs.null());
    }

    fn read(&mut self, _handle: i32, offset: i32, count: i32, data: &mut OutSeq<'_, u8>) -> i32 {
        let mut ret = 0;
        let pfs = &self.pfs;
        method(&mut || {
            let span = pfs.read_span(offset, count);
            ret = match data.extend_from_slice(span) {
                Ok(()) => span.len() as i32,
                Err(_) => -1,
            };
        });
        ret
    }
}

fn cerr(e: CallError) -> Error {
    match e {
        CallError::Status(s) => Error::Status(s as u16),
        e => Error::Transport(e.to_string()),
    }
}

/// The generated client stubs over any [`ClientTransport`].
pub struct FpClient<T> {
    /// The transport.
    pub t: T,
}

impl<T: ClientTransport> PfsClient for FpClient<T> {
    fn name(&self) -> &'static str {
        "fastpath"
    }

    fn null(&mut self) -> Result<(), Error> {
        pfs::null_call(&mut self.t).map_err(cerr)
    }

    fn pfs_open(
        &mut self,
        client: i32,
        fobj: i32,
        flags: i32,
        mode: i32,
        handle: &mut i32,
    ) -> Result<i32, Error> {
        pfs::pfs_open(&mut self.t, client, fobj, flags, mode, handle).map_err(cerr)
    }

    fn pfs_write(
        &mut self,
        handle: i32,
        pos: &mut i32,
        len: i32,
        data: &[i32],
    ) -> Result<i32, Error> {
        pfs::pfs_write(&mut self.t, handle, pos, len, data).map_err(cerr)
    }

    fn pfs_get_direntries(
        &mut self,
        handle: i32,
        pos: &mut i32,
        count: i32,
        data: &mut Vec<i32>,
    ) -> Result<i32, Error> {
        pfs::pfs_get_direntries(&mut self.t, handle, pos, count, data).map_err(cerr)
    }

    fn read(
        &mut self,
        handle: i32,
        offset: i32,
        count: i32,
        data: &mut Vec<u8>,
    ) -> Result<i32, Error> {
        pfs::read(&mut self.t, handle, offset, count, data).map_err(cerr)
    }
}

/// Serves the generated stubs on `end` (family `fastpath`).
pub fn serve(family: &str, end: &mut ServerEnd) -> Result<(), CallError> {
    match family {
        "fastpath" => pfs::serve(&mut FpServer::default(), end),
        _ => Err(CallError::Malformed("unknown family")),
    }
}

/// The generated client stubs over a channel.
pub fn shm_client(end: ClientEnd) -> Result<Box<dyn PfsClient>, String> {
    Ok(Box::new(FpClient { t: end }))
}

// ---------------------------------------------------------------------
// The loopback carrier.

/// A server behind [`FpLoop`]: answers one request found in `t`.
pub trait LoopServer {
    /// Dispatches the request `key` of `len` record bytes; the reply's
    /// record length, or the refusal's status.
    fn handle(&mut self, t: &mut LoopSide, key: u16, len: usize) -> Result<usize, Status>;
}

/// The carrier's memory: message buffer, string area, server scratch.
pub struct LoopSide {
    buf: AlignedBuf,
    cap: usize,
    area: AlignedBuf,
    area_len: usize,
    scratch: AlignedBuf,
}

/// The loopback carrier of fastpath's stubs.
pub struct FpLoop<H> {
    side: LoopSide,
    used: usize,
    /// The server.
    pub server: H,
}

/// Per-string limit of the loopback (the default limits').
const MAX_STRING: usize = 2 << 20;

impl<H: LoopServer> FpLoop<H> {
    /// A loopback with a `cap`-byte message buffer and an `area`-byte
    /// string area.
    pub fn new(server: H, cap: usize, area: usize) -> FpLoop<H> {
        FpLoop {
            side: LoopSide {
                buf: AlignedBuf::new(cap),
                cap,
                area: AlignedBuf::new(area),
                area_len: area,
                scratch: AlignedBuf::new(area),
            },
            used: 0,
            server,
        }
    }
}

/// The loop body for one request: the loopback's "receive".
#[inline(never)]
pub fn fp_serve_one<H: LoopServer>(
    h: &mut H,
    side: &mut LoopSide,
    key: u16,
    len: usize,
) -> Result<usize, Status> {
    h.handle(side, key, len)
}

// SAFETY: `buf` is the `AlignedBuf`'s `cap` bytes (a `Vec<u64>`, so
// 8-aligned), owned by this carrier and used by nothing else while `self`
// is borrowed; `reply_bytes` returns a range checked against the area,
// which starts 8-aligned.
unsafe impl<H: LoopServer> ClientTransport for FpLoop<H> {
    #[inline(always)]
    fn buf(&mut self) -> NonNull<u8> {
        NonNull::from(&mut *self.side.buf.bytes()).cast()
    }

    #[inline(always)]
    fn capacity(&self) -> usize {
        self.side.cap
    }

    #[inline(always)]
    fn begin(&mut self) {
        self.used = 0;
    }

    #[inline]
    fn put(&mut self, bytes: &[u8], align: usize) -> Result<u32, CallError> {
        let at = self.used.next_multiple_of(align.max(1));
        let size = self.side.area_len;
        if bytes.len() > MAX_STRING || at > size || bytes.len() > size - at {
            return Err(CallError::AreaFull {
                len: bytes.len(),
                at,
                size,
            });
        }
        let area = self.side.area.bytes().as_mut_ptr();
        // SAFETY: `at + bytes.len() <= area_len` (checked above), and the
        // area's buffer holds at least `area_len` bytes (`new`), so the
        // destination lies in it; `bytes` does not overlap it (the area is
        // borrowed mutably here).
        unsafe { idl::rt::copy_bytes(bytes.as_ptr(), area.add(at), bytes.len()) };
        self.used = at + bytes.len();
        Ok(at as u32)
    }

    #[inline]
    fn call(&mut self, key: u16, len: usize) -> Result<usize, CallError> {
        match fp_serve_one(&mut self.server, &mut self.side, key, len) {
            Ok(n) => Ok(n),
            Err(s) => Err(CallError::Status(s)),
        }
    }

    #[inline]
    fn reply_bytes(&self, off: u32, len: usize) -> Result<&[u8], CallError> {
        let (off, size) = (off as usize, self.side.area_len);
        if len > MAX_STRING || off > size || len > size - off {
            return Err(CallError::Malformed("descriptor outside the area"));
        }
        let p = self.side.area.as_ptr();
        // SAFETY: `off .. off + len` lies in the area's `area_len` bytes
        // (checked), which live as long as `&self`; bytes are valid for
        // any value and nothing writes them while `&self` is held.
        Ok(unsafe { std::slice::from_raw_parts(p.add(off), len) })
    }
}

// SAFETY: the buffer, the area and the scratch are three separate
// `AlignedBuf`s (8-aligned, disjoint), of `cap`, `area_len` and
// `area_len` bytes, owned by this side and used by no one else while it
// is borrowed mutably; `wait` is never called on the loopback (it has no
// other party), and the request's length is checked by the dispatcher.
unsafe impl ServerTransport for LoopSide {
    fn wait(&mut self) -> Result<(u16, usize), CallError> {
        Err(CallError::Closed)
    }

    #[inline(always)]
    fn buf(&mut self) -> NonNull<u8> {
        NonNull::from(&mut *self.buf.bytes()).cast()
    }

    #[inline(always)]
    fn capacity(&self) -> usize {
        self.cap
    }

    #[inline(always)]
    fn area(&mut self) -> (NonNull<u8>, usize) {
        (NonNull::from(&mut *self.area.bytes()).cast(), self.area_len)
    }

    #[inline(always)]
    fn scratch(&mut self) -> NonNull<u8> {
        NonNull::from(&mut *self.scratch.bytes()).cast()
    }

    #[inline(always)]
    fn max_string_bytes(&self) -> u32 {
        MAX_STRING as u32
    }

    fn reply(&mut self, _s: Status, _len: usize, _strings: Range<u32>) -> Result<(), CallError> {
        Ok(())
    }
}

impl LoopServer for FpServer {
    #[inline]
    fn handle(&mut self, t: &mut LoopSide, key: u16, len: usize) -> Result<usize, Status> {
        let req: Request<'_> = t.request(len);
        pfs::dispatch(self, key, req).map(|r| r.len)
    }
}

/// The baseline server: calls an empty method, replies nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct EmptyServer;

impl LoopServer for EmptyServer {
    fn handle(&mut self, _t: &mut LoopSide, _key: u16, _len: usize) -> Result<usize, Status> {
        method(&mut || {});
        Ok(0)
    }
}

/// A family over [`FpLoop`] for the counter.
pub struct LoopSubject<C> {
    name: &'static str,
    client: C,
    empty: FpLoop<EmptyServer>,
    data: Vec<i32>,
    out: Vec<i32>,
}

impl<C: PfsClient> Subject for LoopSubject<C> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn op(&mut self, op: usize) {
        let e = &mut self.empty;
        call_op(&mut self.client, op, &self.data, &mut self.out, &mut || {
            let _ = black_box(e.call(7, 0));
        });
    }
}

fn loop_subject<C: PfsClient + 'static>(name: &'static str, client: C) -> Box<dyn Subject> {
    Box::new(LoopSubject {
        name,
        client,
        empty: FpLoop::new(EmptyServer, 64, 64),
        data: (0..TABLE4_INTS as i32).collect(),
        out: Vec::with_capacity(TABLE4_INTS),
    })
}

/// The generated stubs over the loopback, for the counter.
pub fn count_subject() -> Option<Box<dyn Subject>> {
    Some(loop_subject(
        "fastpath",
        FpClient {
            t: FpLoop::new(FpServer::default(), 8192, 64 << 10),
        },
    ))
}

/// The generated (static) stubs over a shared-memory channel in one
/// thread, for the counter: the client's `call` posts the request on the
/// channel, and where it would wait for the reply its loopback step runs
/// the generated server loop (`pfs::serve`) once on the channel's server
/// end, over [`ServerEnd::posted`]: it takes the request, dispatches it,
/// replies, looks for a next request and, finding none, returns; the
/// client's wait then finds the reply. So this column pays the channel's
/// protocol (the exchanges, the state checks, the waiting rule's
/// bookkeeping, the look for a next request) as the dynamic column does,
/// where the `fastpath` column's [`FpLoop`] has none.
pub fn shm_count_subject() -> Option<Box<dyn Subject>> {
    let config = idl::rt::shm::Config {
        capacity: 8192,
        area: 64 << 10,
        ..Default::default()
    };
    let (mut client, end) = idl::rt::shm::pair(&config).ok()?;
    // Leaked: the counter keeps its subjects for the process's lifetime.
    let server: &'static mut (FpServer, ServerEnd) =
        Box::leak(Box::new((FpServer::default(), end)));
    // SAFETY: the step's argument is the leaked pair, used from now on
    // only by the step, which runs on the client's thread inside its
    // calls, one at a time.
    unsafe {
        client.set_loopback(Some((
            static_step,
            (server as *mut (FpServer, ServerEnd)).cast(),
        )))
    };
    Some(loop_subject("fastpath over shm", FpClient { t: client }))
}

/// The loopback step of [`shm_count_subject`]: the generated server loop
/// over the requests posted on the end.
///
/// # Safety
/// `arg` is the subject's leaked `(FpServer, ServerEnd)`, not otherwise
/// borrowed while the step runs.
unsafe extern "C" fn static_step(arg: *mut (), _: u64) -> i64 {
    // SAFETY: the function's contract.
    let (server, end) = unsafe { &mut *arg.cast::<(FpServer, ServerEnd)>() };
    match pfs::serve(server, &mut end.posted()) {
        Ok(()) => 0,
        Err(_) => -1,
    }
}

/// The dynamic stubs for the counter: a shared-memory channel in one
/// thread whose client end is a loopback ([`dynamic::shm_loopback`]): the
/// dynamic client's generated call posts the request, and where it would
/// block it runs the dynamic server's generated loop, which answers it.
pub fn dynamic_subject() -> Option<Box<dyn Subject>> {
    let d = dynamic::Dyn::load().ok()?;
    let end = dynamic::shm_loopback(d).ok()?;
    Some(loop_subject(
        "fastpath dynamic",
        dynamic::DynClient::new(d, end),
    ))
}

/// The dynamic stubs (`idl::dynamic`): the same IDL text loaded at run
/// time, its marshalling, unmarshalling and dispatch generated by vcode.
/// The client uses the slot-level API (`DynClient::call_slots`: a
/// scripting host's form), which over a shared-memory channel runs the
/// operation's generated whole call (marshal, post, wait, take,
/// unmarshal); the server is the generated dispatch-and-reply loop
/// calling C handlers with direct transfer.
pub mod dynamic {
    use super::*;
    use idl::dynamic::{DynServer, Handler, Interface};

    /// The loaded interface and its server, for the process's lifetime
    /// (leaked once: the server borrows the interface, and the handlers'
    /// context must outlive both).
    #[derive(Clone, Copy)]
    pub struct Dyn {
        /// The interface.
        pub iface: &'static Interface,
        /// Its server.
        pub server: &'static DynServer<'static>,
        keys: [usize; 5],
    }

    unsafe extern "C" fn h_open(
        ctx: *mut Pfs,
        client: i32,
        fobj: i32,
        flags: i32,
        mode: i32,
        handle: *mut i32,
    ) -> i32 {
        let mut ret = 0;
        // SAFETY: `ctx` is the leaked `Pfs` registered with the handler;
        // `handle` points into the received record (the dispatch's
        // contract, docs/idl.md "Dynamic stubs").
        let (pfs, handle) = unsafe { (&mut *ctx, &mut *handle) };
        method(&mut || ret = pfs.open(client, fobj, flags, mode, handle));
        ret
    }

    unsafe extern "C" fn h_write(
        ctx: *mut Pfs,
        handle: i32,
        pos: *mut i32,
        len: i32,
        data: *const i32,
        n: u64,
    ) -> i32 {
        let mut ret = 0;
        // SAFETY: as `h_open`; `data` holds `n` checked elements.
        let (pfs, pos, data) = unsafe {
            (
                &mut *ctx,
                &mut *pos,
                std::slice::from_raw_parts(data, n as usize),
            )
        };
        method(&mut || ret = pfs.write(handle, pos, len, data));
        ret
    }

    unsafe extern "C" fn h_dir(
        ctx: *mut Pfs,
        handle: i32,
        pos: *mut i32,
        count: i32,
        data: *mut i32,
        n: *mut u32,
    ) -> i32 {
        let mut ret = 0;
        // SAFETY: as `h_open`; `data` has room for `*n` elements.
        let (pfs, pos, cap) = unsafe { (&mut *ctx, &mut *pos, *n as usize) };
        let k = Pfs::direntries_len(count).min(cap);
        // SAFETY: `k <= *n` elements of the handler's room.
        let out = unsafe { std::slice::from_raw_parts_mut(data, k) };
        method(&mut || ret = pfs.direntries(handle, pos, out));
        // SAFETY: as above.
        unsafe { *n = k as u32 };
        ret
    }

    unsafe extern "C" fn h_null(ctx: *mut Pfs) {
        // SAFETY: as `h_open`.
        let pfs = unsafe { &mut *ctx };
        method(&mut || pfs.null());
    }

    unsafe extern "C" fn h_read(
        ctx: *mut Pfs,
        _handle: i32,
        offset: i32,
        count: i32,
        data: *mut u8,
        n: *mut u32,
    ) -> i32 {
        let mut ret = 0;
        // SAFETY: as `h_open`; `data` has room for `*n` bytes.
        let (pfs, cap) = unsafe { (&mut *ctx, *n as usize) };
        let span = pfs.read_span(offset, count);
        let k = span.len().min(cap);
        // SAFETY: `k <= *n` bytes of the handler's room.
        let out = unsafe { std::slice::from_raw_parts_mut(data, k) };
        method(&mut || {
            out.copy_from_slice(&span[..k]);
            ret = k as i32;
        });
        // SAFETY: as above.
        unsafe { *n = k as u32 };
        ret
    }

    impl Dyn {
        /// Loads `pfs_bench.idl` at run time and generates its stubs.
        pub fn load() -> Result<Dyn, String> {
            let src = include_str!("../../peers/idl/pfs_bench.idl");
            let iface: &'static Interface = Box::leak(Box::new(
                Interface::load(src, "pfs").map_err(|e| e.to_string())?,
            ));
            let ctx: *mut Pfs = Box::leak(Box::new(Pfs::new()));
            let h = |f: usize| {
                // SAFETY: each handler below has the C signature
                // docs/idl.md gives for its operation; the context is
                // leaked, so it outlives the server.
                unsafe { Handler::new(f, ctx.cast()) }
            };
            // SAFETY: as above.
            let server = unsafe {
                iface.server(&[
                    ("pfs_open", h(h_open as *const () as usize)),
                    ("pfs_write", h(h_write as *const () as usize)),
                    ("pfs_get_direntries", h(h_dir as *const () as usize)),
                    ("null_call", h(h_null as *const () as usize)),
                    ("read", h(h_read as *const () as usize)),
                ])
            }
            .map_err(|e| e.to_string())?;
            let server: &'static DynServer<'static> = Box::leak(Box::new(server));
            let mut keys = [0; 5];
            for (k, n) in keys.iter_mut().zip([
                "null_call",
                "pfs_open",
                "pfs_write",
                "pfs_get_direntries",
                "read",
            ]) {
                *k = iface
                    .op_index(n)
                    .ok_or("pfs_bench.idl lacks an operation")?;
            }
            Ok(Dyn {
                iface,
                server,
                keys,
            })
        }
    }

    /// A channel in one thread: its client end, a loopback whose waits run
    /// `d`'s generated server loop on the server end
    /// (`DynServer::loopback`, which leaks it: the counter keeps its
    /// subjects for the process's lifetime).
    pub fn shm_loopback(d: Dyn) -> Result<ClientEnd, String> {
        let config = idl::rt::shm::Config {
            capacity: 8192,
            area: 64 << 10,
            ..Default::default()
        };
        let (mut client, end) = idl::rt::shm::pair(&config).map_err(|e| e.to_string())?;
        d.server
            .loopback(&mut client, end)
            .map_err(|e| e.to_string())?;
        Ok(client)
    }

    /// The generated dispatch behind [`FpLoop`].
    pub struct DynLoopServer {
        /// The loaded interface and server.
        pub d: Dyn,
    }

    impl LoopServer for DynLoopServer {
        #[inline]
        fn handle(&mut self, t: &mut LoopSide, key: u16, len: usize) -> Result<usize, Status> {
            match self.d.server.dispatch_in(t, key, len) {
                Ok((Status::Ok, n)) => Ok(n),
                Ok((s, _)) => Err(s),
                Err(_) => Err(Status::ServerFailed),
            }
        }
    }

    /// The slot-level dynamic client.
    pub struct DynClient<T> {
        d: Dyn,
        /// The library's client, made once (as a caller keeps it): making
        /// and dropping one per call would count its two empty `Vec`s.
        c: idl::dynamic::DynClient<'static>,
        /// The transport.
        pub t: T,
        slots: [u64; 8],
    }

    impl<T> DynClient<T> {
        /// A client of `d` over `t`.
        pub fn new(d: Dyn, t: T) -> DynClient<T> {
            DynClient {
                d,
                c: d.iface.client(),
                t,
                slots: [0; 8],
            }
        }
    }

    fn derr(e: idl::dynamic::CallError) -> Error {
        Error::Transport(e.to_string())
    }

    impl<T: ClientTransport> DynClient<T> {
        /// Marshals the slots, calls, unmarshals: operation `k` of
        /// [`Dyn::keys`], through the library's slot-level call
        /// ([`idl::dynamic::DynClient::call_slots`]: the generated
        /// functions' entry points called directly, the transport's string
        /// area begun only for an operation with in strings).
        #[inline]
        fn run(&mut self, k: usize) -> Result<(), Error> {
            let op = self.d.keys[k];
            // SAFETY: the slots hold the operation's values as the callers
            // below set them (pointers valid for their lengths during the
            // call); the transport's buffer holds every record (8 KiB).
            unsafe { self.c.call_slots(&mut self.t, op, &mut self.slots) }.map_err(derr)
        }

        /// The reply's out array named by slots `s`, `s + 1`, copied.
        fn out<E: Copy>(&self, s: usize, v: &mut Vec<E>) {
            let (p, n) = (self.slots[s] as *const E, self.slots[s + 1] as usize);
            v.clear();
            if n > 0 {
                // SAFETY: `unmarshal_slots` set the pointer from the
                // transport's checked `reply_bytes` for `n` elements, valid
                // while the transport is not called again.
                v.extend_from_slice(unsafe { std::slice::from_raw_parts(p, n) });
            }
        }
    }

    impl<T: ClientTransport> PfsClient for DynClient<T> {
        fn name(&self) -> &'static str {
            "fastpath dynamic"
        }

        fn null(&mut self) -> Result<(), Error> {
            self.run(0)
        }

        fn pfs_open(
            &mut self,
            client: i32,
            fobj: i32,
            flags: i32,
            mode: i32,
            handle: &mut i32,
        ) -> Result<i32, Error> {
            let s = &mut self.slots;
            s[0] = client as u64;
            s[1] = fobj as u64;
            s[2] = flags as u64;
            s[3] = mode as u64;
            self.run(1)?;
            *handle = self.slots[4] as i32;
            Ok(self.slots[5] as i32)
        }

        fn pfs_write(
            &mut self,
            handle: i32,
            pos: &mut i32,
            len: i32,
            data: &[i32],
        ) -> Result<i32, Error> {
            let s = &mut self.slots;
            s[0] = handle as u64;
            s[1] = *pos as u64;
            s[2] = len as u64;
            s[3] = data.as_ptr() as u64;
            s[4] = data.len() as u64;
            self.run(2)?;
            *pos = self.slots[1] as i32;
            Ok(self.slots[5] as i32)
        }

        fn pfs_get_direntries(
            &mut self,
            handle: i32,
            pos: &mut i32,
            count: i32,
            data: &mut Vec<i32>,
        ) -> Result<i32, Error> {
            let s = &mut self.slots;
            s[0] = handle as u64;
            s[1] = *pos as u64;
            s[2] = count as u64;
            self.run(3)?;
            self.out(3, data);
            *pos = self.slots[1] as i32;
            Ok(self.slots[5] as i32)
        }

        fn read(
            &mut self,
            handle: i32,
            offset: i32,
            count: i32,
            data: &mut Vec<u8>,
        ) -> Result<i32, Error> {
            let s = &mut self.slots;
            s[0] = handle as u64;
            s[1] = offset as u64;
            s[2] = count as u64;
            self.run(4)?;
            self.out(3, data);
            Ok(self.slots[5] as i32)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_stubs_are_current() {
        let src = include_str!("../../peers/idl/pfs_bench.idl");
        let want = idl::gen_rust::generate(&idl::parse(src).expect("pfs_bench.idl"));
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/idl/generated_pfs.rs");
        if std::env::var_os("FASTPATH_REGENERATE").is_some() {
            std::fs::write(path, &want).expect("write");
        }
        let have = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            have == want,
            "{path} is stale: FASTPATH_REGENERATE=1 cargo test -p fastpath-bench generated_stubs"
        );
    }

    #[test]
    fn dynamic_stubs_over_the_loopback() {
        let d = dynamic::Dyn::load().unwrap();
        super::super::server::check(&mut dynamic::DynClient::new(
            d,
            FpLoop::new(dynamic::DynLoopServer { d }, 8192, 64 << 10),
        ))
        .unwrap();
    }

    #[test]
    fn dynamic_stubs_over_the_shm_loopback() {
        let d = dynamic::Dyn::load().unwrap();
        super::super::server::check(&mut dynamic::DynClient::new(
            d,
            dynamic::shm_loopback(d).unwrap(),
        ))
        .unwrap();
    }

    #[test]
    fn generated_stubs_over_the_shm_loopback() {
        let (mut client, end) = idl::rt::shm::pair(&idl::rt::shm::Config {
            capacity: 8192,
            area: 64 << 10,
            ..Default::default()
        })
        .unwrap();
        let mut server = (FpServer::default(), end);
        // SAFETY: `server` outlives the client's calls below and is used
        // only through the step meanwhile.
        unsafe { client.set_loopback(Some((static_step, (&raw mut server).cast()))) };
        let mut c = FpClient { t: client };
        super::super::server::check(&mut c).unwrap();
        // SAFETY: no call runs now.
        unsafe { c.t.set_loopback(None) };
    }

    #[test]
    fn generated_stubs_over_the_loopback() {
        super::super::server::check(&mut FpClient {
            t: FpLoop::new(FpServer::default(), 8192, 64 << 10),
        })
        .unwrap();
    }
}
