//! The unsafe edge of the dynamic stubs: the small C helpers generated
//! code calls, and calling generated code (native, or on vcode's
//! reference backend).

use crate::rt::{CallError, ClientTransport};
use vcode::reference::RefCode;
use vcode::{Invoke, InvokeError, Value as V};

/// What the client's generated code is given to reach the transport:
/// the transport, and the error of the last refused `put` or
/// `reply_bytes`.
pub(crate) struct ClientCtx<'a> {
    /// The transport of the call.
    pub t: &'a mut dyn ClientTransport,
    /// Why the last thunk answered with its error value.
    pub err: Option<CallError>,
}

/// The `n` bytes at `p`; an empty slice (not read) for `n == 0`, whatever
/// `p` is.
///
/// # Safety
/// For `n > 0`, `p` is valid for reads of `n` bytes for `'a`, which nothing
/// writes in that time.
pub(crate) unsafe fn bytes_at<'a>(p: *const u8, n: usize) -> &'a [u8] {
    if n == 0 {
        return &[];
    }
    // SAFETY: the function's contract.
    unsafe { std::slice::from_raw_parts(p, n) }
}

/// `ClientTransport::put` for generated code: the offset of the copied
/// string, or -1 with the error kept in the context.
///
/// # Safety
/// `ctx` is the live context of the running call; `src` is valid for
/// `bytes` bytes (the caller's slots, vouched for by the caller of
/// `marshal`).
pub(crate) unsafe extern "C" fn put_thunk(
    ctx: *mut ClientCtx<'_>,
    src: *const u8,
    bytes: u64,
    align: u64,
) -> i64 {
    // SAFETY: the function's contract: the context outlives the call of
    // the generated code that passes it, and nothing else uses it then.
    let ctx = unsafe { &mut *ctx };
    // SAFETY: the function's contract.
    let b = unsafe { bytes_at(src, bytes as usize) };
    match ctx.t.put(b, align as usize) {
        Ok(off) => i64::from(off),
        Err(e) => {
            ctx.err = Some(e);
            -1
        }
    }
}

/// `ClientTransport::buf` for generated code.
///
/// # Safety
/// `ctx` is the live context of the running call.
pub(crate) unsafe extern "C" fn buf_thunk(ctx: *mut ClientCtx<'_>) -> *mut u8 {
    // SAFETY: as for `put_thunk`.
    let ctx = unsafe { &mut *ctx };
    ctx.t.buf().as_ptr()
}

/// `ClientTransport::reply_bytes` for generated code: the address of the
/// checked bytes, or null with the error kept in the context.
///
/// # Safety
/// `ctx` is the live context of the running call.
pub(crate) unsafe extern "C" fn reply_thunk(
    ctx: *mut ClientCtx<'_>,
    off: u64,
    bytes: u64,
) -> *const u8 {
    // SAFETY: as for `put_thunk`.
    let ctx = unsafe { &mut *ctx };
    let Ok(off) = u32::try_from(off) else {
        return std::ptr::null();
    };
    match ctx.t.reply_bytes(off, bytes as usize) {
        Ok(b) => b.as_ptr(),
        Err(e) => {
            ctx.err = Some(e);
            std::ptr::null()
        }
    }
}

/// Copies an in string (`n` bytes) from the string area into the
/// server's private scratch memory and checks it there: 1 if it is UTF-8.
///
/// # Safety
/// `dst` and `src` are valid for `n` bytes and do not overlap: generated
/// code passes a string it checked to lie in the area, and the same
/// offset of the scratch memory, which is at least as long.
pub(crate) unsafe extern "C" fn str_in(dst: *mut u8, src: *const u8, n: u64) -> u32 {
    // SAFETY: the function's contract.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, n as usize) };
    // SAFETY: just written, private.
    let b = unsafe { bytes_at(dst, n as usize) };
    u32::from(std::str::from_utf8(b).is_ok())
}

/// Copies `n` bytes from `src` to `dst` (the marshalling of in strings
/// and of large aggregates).
///
/// # Safety
/// `src` and `dst` are valid for `n` bytes and do not overlap. Generated
/// code calls it with a source the caller's slots name (vouched for by
/// the caller of `marshal`) and a destination it has bounds-checked
/// against the string area or the record.
pub(crate) unsafe extern "C" fn copy_bytes(dst: *mut u8, src: *const u8, n: u64) {
    // SAFETY: the function's contract.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, n as usize) }
}

/// Zeroes `n` bytes at `dst` (out aggregates larger than the inline copy).
///
/// # Safety
/// `dst` is valid for `n` bytes: generated code passes a field of the
/// record, which the caller of `dispatch` provides in full.
pub(crate) unsafe extern "C" fn zero_bytes(dst: *mut u8, n: u64) {
    // SAFETY: the function's contract.
    unsafe { std::ptr::write_bytes(dst, 0, n as usize) }
}

/// The dispatch's private context, in the server's own memory (never the
/// shared segment: a spilled pointer there could be rewritten by the client
/// between its store and the handler call): the scratch memory for in
/// strings, then room for the handler arguments past the registers.
#[repr(C)]
pub(crate) struct DispatchCtx {
    /// The server's private scratch memory, as long as the string area.
    pub scratch: *mut u8,
    /// Spilled handler arguments (written by the generated code before
    /// they are read; never read by Rust).
    pub spill: [std::mem::MaybeUninit<u64>; super::codegen::SPILL_SLOTS],
}

impl DispatchCtx {
    /// A context for one dispatch with `scratch` as its scratch memory.
    #[inline(always)]
    pub(crate) fn new(scratch: *mut u8) -> DispatchCtx {
        DispatchCtx {
            scratch,
            spill: [std::mem::MaybeUninit::uninit(); super::codegen::SPILL_SLOTS],
        }
    }
}

/// `marshal` and `unmarshal` as native function pointers.
pub(crate) type StubFn = unsafe extern "C" fn(*mut u64, *mut u8, *mut ClientCtx<'static>) -> i64;
/// `dispatch` as a native function pointer.
type DispatchFn = unsafe extern "C" fn(u64, *mut u8, u64, *mut u8, u64, *mut DispatchCtx) -> u64;

/// `shm_call` as a native function pointer.
pub(crate) type ShmFn = unsafe extern "C" fn(*mut u64, *mut crate::rt::shm::GenClient) -> i64;

/// A generated `shm_call` (native code only).
pub(crate) struct ShmStub {
    f: ShmFn,
    /// Keeps the code alive.
    code: vcode::Code,
}

impl ShmStub {
    /// Wraps native code.
    pub(crate) fn new(code: vcode::Code) -> vcode::Result<ShmStub> {
        // SAFETY: `codegen::shm_call` begins with "%p%p" and returns an
        // `l`; `as_fn` checks that again.
        let f = unsafe { code.as_fn::<ShmFn>()? };
        Ok(ShmStub { f, code })
    }

    /// The entry point, valid while this lives.
    pub(crate) fn entry(&self) -> ShmFn {
        self.f
    }

    /// The disassembly.
    pub(crate) fn listing(&self) -> String {
        self.code.disassemble()
    }
}

/// `shm_serve` as a native function pointer.
pub(crate) type ServeFn = unsafe extern "C" fn(*mut crate::rt::shm::GenServer, u64) -> i64;

/// A generated `shm_serve` (native code only).
pub(crate) struct ServeStub {
    pub(crate) f: ServeFn,
    /// Keeps the code alive.
    code: vcode::Code,
}

impl ServeStub {
    /// Wraps native code.
    pub(crate) fn new(code: vcode::Code) -> vcode::Result<ServeStub> {
        // SAFETY: `codegen::shm_serve` begins with "%p%ul" and returns an
        // `l`; `as_fn` checks that again.
        let f = unsafe { code.as_fn::<ServeFn>()? };
        Ok(ServeStub { f, code })
    }

    /// The disassembly.
    pub(crate) fn listing(&self) -> String {
        self.code.disassemble()
    }
}

/// A generated `marshal` or `unmarshal` function: native code and its
/// entry point, or the reference backend's recording.
pub(crate) struct Stub {
    /// The native entry point (`None` on the reference backend).
    f: Option<StubFn>,
    /// Keeps the code alive.
    code: Code,
}

/// What a stub or dispatch runs.
enum Code {
    /// Native code, mapped while this lives.
    Native(vcode::Code),
    /// The reference backend's recording.
    Reference(RefCode),
}

impl Code {
    /// The disassembly (native) or the instruction listing (reference).
    fn listing(&self) -> String {
        match self {
            Code::Native(c) => c.disassemble(),
            Code::Reference(c) => c.listing(),
        }
    }
}

impl Stub {
    /// Wraps native code.
    pub(crate) fn native(code: vcode::Code) -> vcode::Result<Stub> {
        // SAFETY: the generators begin these functions with the signature
        // "%p%p%p" and return an `l`; `as_fn` checks that again.
        let f = unsafe { code.as_fn::<StubFn>()? };
        Ok(Stub {
            f: Some(f),
            code: Code::Native(code),
        })
    }

    /// The generated code, listed.
    pub(crate) fn listing(&self) -> String {
        self.code.listing()
    }

    /// The native entry point (`None` on the reference backend); valid
    /// while this stub lives.
    pub(crate) fn native_fn(&self) -> Option<StubFn> {
        self.f
    }

    /// Wraps the reference backend's recording.
    pub(crate) fn reference(code: RefCode) -> Stub {
        Stub {
            f: None,
            code: Code::Reference(code),
        }
    }

    /// Runs the function.
    ///
    /// # Safety
    /// `slots` holds the operation's slots (pointers in them valid for the
    /// lengths beside them), `rec` is the transport's message buffer,
    /// valid for the operation's whole record, and `ctx` the live context
    /// of this call.
    #[inline(always)]
    pub(crate) unsafe fn run(
        &self,
        slots: *mut u64,
        rec: *mut u8,
        ctx: &mut ClientCtx<'_>,
    ) -> Result<i64, InvokeError> {
        let ctx = (ctx as *mut ClientCtx<'_>).cast::<ClientCtx<'static>>();
        match self.f {
            // SAFETY: the function's contract, which is the generated
            // code's (codegen.rs): it touches only the slots and the
            // record, and reaches the string area through the transport.
            // The context's lifetime is erased for the call only.
            Some(f) => Ok(unsafe { f(slots, rec, ctx) }),
            // SAFETY: as above.
            None => unsafe { self.run_reference(slots, rec, ctx) },
        }
    }

    /// [`Stub::run`] on the reference backend.
    ///
    /// # Safety
    /// As [`Stub::run`].
    #[cold]
    unsafe fn run_reference(
        &self,
        slots: *mut u64,
        rec: *mut u8,
        ctx: *mut ClientCtx<'static>,
    ) -> Result<i64, InvokeError> {
        let Code::Reference(c) = &self.code else {
            return Err(InvokeError::Arity {
                expected: 3,
                found: 0,
            });
        };
        let args = [V::P(slots as usize), V::P(rec as usize), V::P(ctx as usize)];
        // SAFETY: as for `run`; the reference backend performs the same
        // loads, stores and calls.
        match unsafe { c.invoke(&args) }? {
            V::L(r) => Ok(r),
            _ => Err(InvokeError::Arity {
                expected: 3,
                found: args.len(),
            }),
        }
    }
}

/// A generated `dispatch` function.
pub(crate) struct Dispatch {
    /// The native entry point (`None` on the reference backend).
    f: Option<DispatchFn>,
    /// Keeps the code alive.
    code: Code,
}

impl Dispatch {
    /// Wraps native code.
    pub(crate) fn native(code: vcode::Code) -> vcode::Result<Dispatch> {
        // SAFETY: `codegen::dispatch` begins with "%ul%p%ul%p%ul%p" and
        // returns a `ul`; `as_fn` checks that again.
        let f = unsafe { code.as_fn::<DispatchFn>()? };
        Ok(Dispatch {
            f: Some(f),
            code: Code::Native(code),
        })
    }

    /// The generated code, listed.
    pub(crate) fn listing(&self) -> String {
        self.code.listing()
    }

    /// Wraps the reference backend's recording.
    pub(crate) fn reference(code: RefCode) -> Dispatch {
        Dispatch {
            f: None,
            code: Code::Reference(code),
        }
    }

    /// Runs the dispatch.
    ///
    /// # Safety
    /// `rec` is valid for the largest record of the interface, `area` for
    /// `alen` bytes, `ctx` is private and its scratch valid for `alen`
    /// bytes, and the
    /// registered handlers are sound for the arguments the generated code
    /// passes them (docs/idl.md).
    #[inline(always)]
    pub(crate) unsafe fn run(
        &self,
        key: u64,
        rec: *mut u8,
        len: u64,
        area: *mut u8,
        alen: u64,
        ctx: *mut DispatchCtx,
    ) -> Result<u64, InvokeError> {
        match self.f {
            // SAFETY: the function's contract; the generated code checks
            // every descriptor before it uses it.
            Some(f) => Ok(unsafe { f(key, rec, len, area, alen, ctx) }),
            // SAFETY: as above.
            None => unsafe { self.run_reference(key, rec, len, area, alen, ctx) },
        }
    }

    /// [`Dispatch::run`] on the reference backend.
    ///
    /// # Safety
    /// As [`Dispatch::run`].
    #[cold]
    unsafe fn run_reference(
        &self,
        key: u64,
        rec: *mut u8,
        len: u64,
        area: *mut u8,
        alen: u64,
        ctx: *mut DispatchCtx,
    ) -> Result<u64, InvokeError> {
        let Code::Reference(c) = &self.code else {
            return Err(InvokeError::Arity {
                expected: 6,
                found: 0,
            });
        };
        let args = [
            V::UL(key),
            V::P(rec as usize),
            V::UL(len),
            V::P(area as usize),
            V::UL(alen),
            V::P(ctx as usize),
        ];
        // SAFETY: as for `run`.
        match unsafe { c.invoke(&args) }? {
            V::UL(r) => Ok(r),
            _ => Err(InvokeError::Arity {
                expected: 6,
                found: args.len(),
            }),
        }
    }
}
