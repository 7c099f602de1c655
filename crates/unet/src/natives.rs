//! The U-Net/SLE native methods (paper §2): the only way an endpoint's applet
//! reaches its endpoint, and the place where protection is enforced.
//!
//! [`bind`] binds the paper's eight natives, with their exact descriptors
//! ([`NATIVES`]), to functions that act on the invocation's host value, an
//! engine-side [`NativeHost`] for the endpoint the applet runs for
//! ([`jive::Context::split`]). One bound table serves every applet of a
//! host type; the endpoint is passed per invocation.
//!
//! Each native checks every argument against the applet's own arrays and the
//! endpoint's own buffer area and queues **before** it moves anything, with
//! offsets and lengths compared in 64-bit arithmetic so that no sum
//! overflows. A failed check is a [`jive::NativeError`]: the invocation traps
//! with [`jive::TrapKind::Native`], whose message jive prefixes with the
//! native's name and descriptor, e.g. `doLtoHDMA([BIII)V: useroff 8192 + len
//! 100 exceeds the buffer area (8192 bytes)`. Nothing of a failed call has
//! moved: not a byte of the area or the arrays, no queue entry, no message.
//! As in the paper, the natives do not protect the applet from writing
//! garbage into its own endpoint's area and queues; they keep it inside them.
//!
//! The success paths do not allocate or format: error messages are built in
//! `#[cold]` functions. jive's byte arrays are `[i8]` and the host speaks
//! `[u8]`, and this module has no `unsafe`, so a copy between the two goes
//! through a per-thread scratch buffer (grown once to the largest copy, then
//! reused) with a conversion loop the compiler vectorizes.

use core::fmt;

use jive::subset::Prim;
use jive::{Arrays, Context, NativeError, Natives};
use thiserror::Error;

/// The number of buffer offsets in a receive descriptor (the paper's
/// "fourteen 32-bit words"); `dmaRxd` requires an offsets array of exactly
/// this length. The receive descriptor's own bound
/// ([`crate::layout::RX_BUFFERS_MAX`]), so that what the native accepts
/// the descriptor's writer ([`crate::shm::RxQueue::write_rx_buffers`],
/// which asserts it) takes.
pub const RX_OFFSETS: usize = crate::layout::RX_BUFFERS_MAX;

/// The largest payload a receive descriptor holds inline (`dmaRxdPayload`):
/// the descriptor's own bound ([`crate::layout::INLINE_MAX`]), so that what
/// the native accepts the descriptor's writer
/// ([`crate::shm::RxQueue::write_rx_inline`], which asserts it) takes.
pub const INLINE_MAX: usize = crate::layout::INLINE_MAX;

// The paper's receive descriptor: fourteen 32-bit words, or 56 bytes
// inline (Escape and the natives' tests use these numbers).
const _: () = assert!(RX_OFFSETS == 14 && INLINE_MAX == 56);

/// What the natives need from the engine, for the endpoint an applet runs for.
///
/// The engine implements it for its endpoint state and passes that state as
/// the host value of each invocation ([`jive::Applet::call`],
/// [`jive::Applet::load_with_host`]). The natives check their arguments
/// before calling any method that moves data, so the ranges given to
/// [`NativeHost::read_area`] and [`NativeHost::write_area`] are always inside
/// the area.
pub trait NativeHost: 'static {
    /// The endpoint's buffer size (getFreeBufferLength).
    fn buffer_size(&self) -> u32;
    /// The length in bytes of the endpoint's buffer area.
    fn area_len(&self) -> u32;
    /// Copies area[off..off+dst.len()) into dst, a Java `byte[]` (bytes
    /// are `i8` there: the host copies straight between the two, with no
    /// conversion pass). The caller (the native) has checked the range.
    fn read_area(&self, off: u32, dst: &mut [i8]);
    /// Copies src, a Java `byte[]`, into area[off..off+src.len()). Checked
    /// by the caller, [`NativeHost::area_held`] too.
    fn write_area(&mut self, off: u32, src: &[i8]);
    /// The bytes of the area lent to the running invocation as its message
    /// (`start..end`; empty where none are: the default), which no native
    /// may write while the invocation reads them (the lent `doTx`, docs/unet.md):
    /// `doLtoHDMA` refuses a range that overlaps them, with a trap, before
    /// it calls [`NativeHost::write_area`].
    fn area_held(&self) -> core::ops::Range<u32> {
        0..0
    }
    /// Pops the next valid offset from the free queue (the host skips and counts invalid ones), None if empty.
    fn pop_free(&mut self) -> Option<u32>;
    /// Pushes a receive descriptor; `Err` if the receive queue is full.
    fn push_rx(&mut self, chan: u16, len: u32, body: RxBody<'_>) -> Result<(), HostError>;
    /// Transmits one message on channel `chan`; Err if chan is not an open channel of this endpoint, or too long, or the transport refused it.
    fn transmit(&mut self, chan: u16, payload: &[i8]) -> Result<(), HostError>;
    /// [`NativeHost::transmit`] at a **tail site** of `txPush`
    /// ([`jive::TAIL_SUFFIX`]): `payload` is `array[off..off + len)` of
    /// the applet's `byte[]` `array` (`(array, off)` is what `at` gives,
    /// read only by a host that defers, so that one that does not keeps
    /// neither live), and the array holds the same bytes
    /// at the end of the invocation, so that a host may make every check
    /// and count now and read the message then, once, straight to where
    /// it goes (the engine's one copy from `TxBuf` into a receiver's
    /// `RxBuf`). The default transmits now.
    fn transmit_tail(
        &mut self,
        chan: u16,
        payload: &[i8],
        at: impl FnOnce() -> (i32, u32),
    ) -> Result<(), HostError> {
        let _ = at;
        self.transmit(chan, payload)
    }
    /// The largest message the endpoint may send.
    fn max_message(&self) -> u32;
    /// Counts one native call that moves `bytes` bytes against the running
    /// invocation's budgets (every native calls it first); `Err` ends the
    /// invocation with a trap. The default counts nothing.
    fn charge(&mut self, bytes: usize) -> Result<(), HostError> {
        let _ = bytes;
        Ok(())
    }
    /// [`NativeHost::charge`] where it needs no more than the count: counts
    /// the call and returns `true` if `charge` would have returned `Ok`
    /// having done only that, else returns `false` having counted nothing
    /// (the clock is due, or the budget spent), and the native's ordinary
    /// form then runs and charges. The natives' fast forms call it
    /// ([`bind`]); the default declines, so that a host that overrides
    /// `charge` alone never has a call go uncharged.
    fn try_charge(&mut self, bytes: usize) -> bool {
        let _ = bytes;
        false
    }
    /// The words this host lends the JIT's inline natives
    /// ([`jive::HostWords`]), if any: then `work` must be the count that
    /// [`NativeHost::charge`] and [`NativeHost::try_charge`] keep (one unit
    /// per call that moves no bytes, `1 + bytes / 4096` for one that moves
    /// `bytes`), `bound` the count at which
    /// `try_charge` declines, and `ints[0]` the buffer size as an `int`
    /// (negative if it does not fit one), so that the inline
    /// `getFreeBufferLength` gives, charges and declines as its other forms
    /// do. If `ring` lends a ring ([`jive::RingWords`]), it must be the
    /// receive queue's free run, and [`NativeHost::push_rx`] must take back
    /// what the inline `dmaRxdPayload` filled ([`jive::RingWords::take`])
    /// before it pushes and lend the run again after, so that the inline
    /// push writes the descriptor `push_rx` would (the payload, then the
    /// header with its seal, as one release store), in order with its own
    /// pushes; a full run (a full
    /// queue, or one whose consumer moved since it was lent) sends the
    /// call to `push_rx`. If `queue` lends a queue ([`jive::QueueWords`]),
    /// it must be the free queue's entries that [`NativeHost::pop_free`]
    /// would give next, bounded by the area's length and aligned to the
    /// buffer size as `pop_free`'s validity check is (none while the host
    /// holds buffers it would give first), and `pop_free` must take back
    /// what the inline `getFreeBuffer` took ([`jive::QueueWords::take`])
    /// before it reads the queue and lend the run again after, so that an
    /// entry the inline form declined (an invalid one) is skipped and
    /// counted there. If `area` lends an area ([`jive::AreaWords`]), it
    /// must be the buffer area itself, of [`NativeHost::area_len`] bytes,
    /// which [`NativeHost::read_area`] and [`NativeHost::write_area`]
    /// copy from and to, so that the inline `doHtoLDMA` and `doLtoHDMA`
    /// check and move what the natives would. `tail`
    /// ([`jive::TailWords`]) must hold the frames and bytes the running
    /// invocation pushed, which [`NativeHost::transmit`] and
    /// [`NativeHost::transmit_tail`] count there too, against the
    /// budgets they check, and [`NativeHost::max_message`]; a channel it
    /// lends must be one that [`NativeHost::transmit_tail`] would defer
    /// a message on, having checked it open, and the host must take the
    /// message the inline `txPush#tail` recorded ([`jive::TailWords::take`])
    /// and send and count it as a deferred one; or, lent with a frame's
    /// room (`frame`, [`jive::FrameWords`]), one that
    /// [`NativeHost::transmit_tail`] would push a frame on at once (open,
    /// and without a checksum, which the inline form does not write),
    /// into room where [`NativeHost::transmit`] would write that frame,
    /// lent again after each of its own frames, and the host must take
    /// the frame written ([`jive::FrameWords::take`]) and make it its
    /// next, counted as `transmit` counts one. The default lends none, and
    /// the inline forms then always take their rare path.
    fn words(&mut self) -> Option<&mut jive::HostWords> {
        None
    }
}

/// The body of a receive descriptor pushed by `dmaRxd` or `dmaRxdPayload`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxBody<'a> {
    /// The message itself, at most [`INLINE_MAX`] bytes (`dmaRxdPayload`).
    Inline(&'a [u8]),
    /// The buffer-area offsets of the buffers holding the message, in order:
    /// `ceil(len / buffer_size)` of them, each a checked buffer boundary
    /// inside the area (`dmaRxd`).
    Buffers(&'a [u32]),
}

/// Why the engine refused a native's request.
#[derive(Error, Debug, Clone, PartialEq, Eq)]
pub enum HostError {
    /// The endpoint's receive queue has no free slot.
    #[error("the endpoint's receive queue is full")]
    RxQueueFull,
    /// The channel tag does not name an open channel of this endpoint.
    #[error("channel {0} is not an open channel of this endpoint")]
    NoSuchChannel(u16),
    /// The channel was closed because its peer went away.
    #[error("channel {0} is closed: its peer endpoint went away")]
    ChannelClosed(u16),
    /// The message exceeds the endpoint's maximum message size.
    #[error("a message of {len} bytes exceeds the endpoint's maximum message size ({max} bytes)")]
    TooLong {
        /// The message length.
        len: u32,
        /// The endpoint's maximum message size.
        max: u32,
    },
    /// The transport did not take the message.
    #[error("the transport refused the message: {0}")]
    Transport(String),
    /// The invocation exceeded one of the engine's budgets.
    #[error("the applet exceeded its budget of {limit} {what}")]
    OverBudget {
        /// Which budget.
        what: &'static str,
        /// Its value.
        limit: u64,
    },
}

/// One native of the paper's §2 list, as [`bind`] registers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NativeSpec {
    /// The method name.
    pub name: &'static str,
    /// The JVM method descriptor it is bound with.
    pub descriptor: &'static str,
    /// The Java declaration an applet writes.
    pub java: &'static str,
    /// What it does and what it checks, in one line.
    pub summary: &'static str,
}

/// The natives [`bind`] registers, in the paper's order.
pub const NATIVES: &[NativeSpec] = &[
    NativeSpec {
        name: "doHtoLDMA",
        descriptor: "([BIII)V",
        java: "static native void doHtoLDMA(byte[] txarray, int txoff, int useroff, int len);",
        summary: "copies buffer area [useroff, useroff+len) into txarray[txoff..]; \
                  checks len, txoff >= 0, txoff+len <= txarray.length, useroff >= 0, useroff+len <= area",
    },
    NativeSpec {
        name: "doLtoHDMA",
        descriptor: "([BIII)V",
        java: "static native void doLtoHDMA(byte[] rxarray, int rxoff, int useroff, int len);",
        summary: "copies rxarray[rxoff..rxoff+len) into the buffer area at useroff; same checks",
    },
    NativeSpec {
        name: "txPush",
        descriptor: "([BIII)V",
        java: "static native void txPush(byte[] txarray, int txoff, int chan, int len);",
        summary: "transmits txarray[txoff..txoff+len) on channel chan; checks the array range, \
                  that chan is open, len <= the maximum message size",
    },
    NativeSpec {
        name: "dmaRxd",
        descriptor: "([III)V",
        java: "static native void dmaRxd(int[] offsets, int chan, int len);",
        summary: "pushes a receive descriptor naming offsets[0..ceil(len/buffer size)); checks 14 offsets, \
                  len <= 14 buffers, chan, each used offset a buffer boundary inside the area, room",
    },
    NativeSpec {
        name: "dmaRxdPayload",
        descriptor: "([BII)V",
        java: "static native void dmaRxdPayload(byte[] payload, int chan, int len);",
        summary: "pushes a receive descriptor with payload[0..len) inline; checks len <= 56, \
                  len <= payload.length, chan, room",
    },
    NativeSpec {
        name: "getFreeBuffer",
        descriptor: "()I",
        java: "static native int getFreeBuffer();",
        summary: "pops the next buffer offset from the free queue, or -1 if it is empty",
    },
    NativeSpec {
        name: "getFreeBufferLength",
        descriptor: "()I",
        java: "static native int getFreeBufferLength();",
        summary: "the endpoint's buffer size",
    },
    NativeSpec {
        name: "newAlignedArray",
        descriptor: "(I)[B",
        java: "static native byte[] newAlignedArray(int nbytes);",
        summary: "a zeroed byte[nbytes] within the applet's heap budget; nbytes >= 0",
    },
];

/// The `byte[]` parameters [`bind`] marks as only read
/// ([`jive::Natives::set_read_only`]): name, descriptor, parameter. An
/// applet may pass a lent `byte[]` ([`jive::LentParam`]) to these and to no
/// other native. Each was decided by reading the native's body, in all its
/// forms (ordinary, fast, inline): a wrong mark is a hole.
///
/// - `doLtoHDMA`'s `rxarray` is the copy's source: [`NativeHost::write_area`]
///   takes it as `&[i8]` (and [`jive::InlineForm::CopyIn`] reads it);
/// - `txPush`'s `txarray`: [`NativeHost::transmit`] takes `&[i8]`;
/// - `txPush#tail`'s `txarray`: [`NativeHost::transmit_tail`] takes `&[i8]`
///   and a host that defers reads the array again after the invocation,
///   never writes it ([`jive::InlineForm::TailPush`] reads it too);
/// - `dmaRxdPayload`'s `payload`: copied into the descriptor through
///   `&[u8]` ([`jive::InlineForm::PushBytes`] reads it too).
///
/// Not marked: `doHtoLDMA`'s `txarray`, the copy's destination
/// ([`NativeHost::read_area`] writes it); `dmaRxd`'s `int[]` (never lent).
pub const READS_ONLY: &[(&str, &str, u16)] = &[
    ("doLtoHDMA", "([BIII)V", 0),
    ("txPush", "([BIII)V", 0),
    ("txPush#tail", "([BIII)V", 0),
    ("dmaRxdPayload", "([BII)V", 0),
];

/// The (name, descriptor) pairs of [`NATIVES`], for documentation and the CLI.
pub fn dump_names() -> impl Iterator<Item = (&'static str, &'static str)> {
    NATIVES.iter().map(|n| (n.name, n.descriptor))
}

/// Binds the paper's eight natives ([`NATIVES`]) for endpoints of host type
/// `H`: every native but `newAlignedArray` needs the invocation's host value
/// to be an `H`, and traps if it is missing or of another type.
///
/// The seven that act on the endpoint also get fast forms
/// ([`jive::FastNative`]): the JIT calls them with the host value typed and
/// no [`Context`], and they run the same checks and moves as the ordinary
/// natives (the same function, `EndpointNative::run`), declining only
/// when the budget's count needs the clock ([`NativeHost::try_charge`]).
pub fn bind<H: NativeHost>() -> Natives {
    let mut t = Natives::new();
    register::<H, DoHtoLDma>(&mut t);
    register::<H, DoLtoHDma>(&mut t);
    register::<H, TxPush>(&mut t);
    register::<H, TxPushTail>(&mut t);
    register::<H, DmaRxd>(&mut t);
    register::<H, DmaRxdPayload>(&mut t);
    register::<H, GetFreeBuffer>(&mut t);
    register::<H, GetFreeBufferLength>(&mut t);
    // Cannot fail: the natives have fast forms, and their descriptors fit
    // the forms (`()I`, `([BII)V`, `([III)V`, `([BIII)V`).
    for (name, descriptor, form) in [
        (
            GetFreeBuffer::NAME,
            GetFreeBuffer::DESCRIPTOR,
            jive::InlineForm::PopU32,
        ),
        (
            GetFreeBufferLength::NAME,
            GetFreeBufferLength::DESCRIPTOR,
            jive::InlineForm::Int(0),
        ),
        (
            DoHtoLDma::NAME,
            DoHtoLDma::DESCRIPTOR,
            jive::InlineForm::CopyOut,
        ),
        (
            DoLtoHDma::NAME,
            DoLtoHDma::DESCRIPTOR,
            jive::InlineForm::CopyIn,
        ),
        (
            DmaRxdPayload::NAME,
            DmaRxdPayload::DESCRIPTOR,
            jive::InlineForm::PushBytes,
        ),
        (DmaRxd::NAME, DmaRxd::DESCRIPTOR, RX_ONE_BUFFER),
        (
            TxPushTail::NAME,
            TxPushTail::DESCRIPTOR,
            jive::InlineForm::TailPush,
        ),
    ] {
        let _ = t.set_inline(name, descriptor, form);
    }
    t.register("newAlignedArray", "(I)[B", new_aligned_array);
    // Cannot fail: each is bound above, with a `byte[]` parameter 0.
    for &(name, descriptor, param) in READS_ONLY {
        let _ = t.set_read_only(name, descriptor, &[param]);
    }
    // Cannot fail: every fast form of the table is for `H`. The words are
    // `H::words`, whichever native lends them; the engine invokes with its
    // host value typed by this lender (`jive::Applet::run_prepared_lent`).
    let _ = t.set_words::<Words<H>>();
    t
}

/// The table's lender of words ([`jive::Natives::set_words`]): a fast
/// form bound to no native, lending [`NativeHost::words`] as every fast
/// form of the table does ([`Fast`]).
pub(crate) struct Words<H>(core::marker::PhantomData<fn() -> H>);

impl<H: NativeHost> jive::FastNative for Words<H> {
    type Host = H;

    /// Never called: no native is bound to it.
    fn call(_: &mut H, _: Arrays<'_>, _: &[i32]) -> Option<Result<i32, NativeError>> {
        None
    }

    #[inline(always)]
    fn words(host: &mut H) -> Option<&mut jive::HostWords> {
        host.words()
    }
}

/// Binds `N` with its ordinary and fast forms.
fn register<H: NativeHost, N: EndpointNative>(t: &mut Natives) {
    t.register(N::NAME, N::DESCRIPTOR, ordinary::<H, N>);
    // Cannot fail: the native was bound just above, and every fast form of
    // the table is for `H`.
    let _ = t.set_fast::<Fast<H, N>>(N::NAME, N::DESCRIPTOR);
}

/// A native that acts on the endpoint: what it charges against the
/// invocation's budget, and the call itself once charged. Its ordinary form
/// ([`ordinary`]) and its fast form ([`Fast`]) differ only in how they find
/// the host value and how they charge, so that the two cannot drift apart.
trait EndpointNative: 'static {
    /// The name it is bound with.
    const NAME: &'static str;
    /// Its descriptor.
    const DESCRIPTOR: &'static str;
    /// Its argument slots.
    const ARGS: usize;
    /// The bytes it charges for ([`NativeHost::charge`]), from arguments
    /// not yet checked.
    fn cost(args: &[i32]) -> usize;
    /// The call, charged: every check, then the move.
    fn run<H: NativeHost>(
        host: &mut H,
        arrays: Arrays<'_>,
        args: &[i32],
    ) -> Result<i32, NativeError>;
}

/// The ordinary form of `N`: the host value through [`Context::split`],
/// the budget through [`NativeHost::charge`].
fn ordinary<H: NativeHost, N: EndpointNative>(
    cx: &mut Context<'_>,
    args: &[i32],
) -> Result<i32, NativeError> {
    if args.len() != N::ARGS {
        return Err(arity(N::ARGS, args.len()));
    }
    let (host, arrays) = cx.split::<H>()?;
    host.charge(N::cost(args)).map_err(refused)?;
    N::run(host, arrays, args)
}

/// The fast form of `N` for host type `H` ([`jive::FastNative`]).
struct Fast<H, N>(core::marker::PhantomData<fn() -> (H, N)>);

impl<H: NativeHost, N: EndpointNative> jive::FastNative for Fast<H, N> {
    type Host = H;

    /// [`ordinary`], with the host given typed; declines (having done
    /// nothing) where the ordinary form's charge would read the clock or
    /// the arguments' count is wrong, so that the ordinary form makes the
    /// check, charges and reports.
    ///
    /// Always inlined into its runtime entry (`rt_native_fast`, one per
    /// native): out of line, `txPush`'s saved six registers a second time
    /// and returned its result through memory.
    #[inline(always)]
    fn call(host: &mut H, arrays: Arrays<'_>, args: &[i32]) -> Option<Result<i32, NativeError>> {
        if args.len() != N::ARGS || !host.try_charge(N::cost(args)) {
            return None;
        }
        Some(N::run(host, arrays, args))
    }

    #[inline(always)]
    fn words(host: &mut H) -> Option<&mut jive::HostWords> {
        host.words()
    }
}

// ---------------------------------------------------------------------------
// The natives.

/// `doHtoLDMA(byte[] txarray, int txoff, int useroff, int len)`.
struct DoHtoLDma;

impl EndpointNative for DoHtoLDma {
    const NAME: &'static str = "doHtoLDMA";
    const DESCRIPTOR: &'static str = "([BIII)V";
    const ARGS: usize = 4;
    fn cost(args: &[i32]) -> usize {
        args[3].max(0) as usize
    }
    #[inline]
    fn run<H: NativeHost>(
        host: &mut H,
        arrays: Arrays<'_>,
        args: &[i32],
    ) -> Result<i32, NativeError> {
        let &[array, txoff, useroff, len] = args else {
            return Err(arity(4, args.len()));
        };
        let array = byte_array(arrays, array, "txarray")?;
        let dst = array_range(array, "txarray", "txoff", txoff, len)?;
        let off = area_range(host.area_len(), "useroff", useroff, len)?;
        host.read_area(off, dst);
        Ok(0)
    }
}

/// `doLtoHDMA(byte[] rxarray, int rxoff, int useroff, int len)`.
struct DoLtoHDma;

impl EndpointNative for DoLtoHDma {
    const NAME: &'static str = "doLtoHDMA";
    const DESCRIPTOR: &'static str = "([BIII)V";
    const ARGS: usize = 4;
    fn cost(args: &[i32]) -> usize {
        args[3].max(0) as usize
    }
    #[inline]
    fn run<H: NativeHost>(
        host: &mut H,
        arrays: Arrays<'_>,
        args: &[i32],
    ) -> Result<i32, NativeError> {
        let &[array, rxoff, useroff, len] = args else {
            return Err(arity(4, args.len()));
        };
        let array = byte_array_read(arrays, array, "rxarray")?;
        let src = array_range(array, "rxarray", "rxoff", rxoff, len)?;
        let off = area_range(host.area_len(), "useroff", useroff, len)?;
        let held = host.area_held();
        if off < held.end && held.start < off + src.len() as u32 {
            return Err(writes_held(off, src.len(), held));
        }
        host.write_area(off, src);
        Ok(0)
    }
}

/// `txPush(byte[] txarray, int txoff, int chan, int len)`.
struct TxPush;

impl EndpointNative for TxPush {
    const NAME: &'static str = "txPush";
    const DESCRIPTOR: &'static str = "([BIII)V";
    const ARGS: usize = 4;
    fn cost(args: &[i32]) -> usize {
        args[3].max(0) as usize
    }
    /// Always inlined into its fast form's entry, so that the call
    /// saves its registers once (as [`Fast::call`] is).
    #[inline(always)]
    fn run<H: NativeHost>(
        host: &mut H,
        arrays: Arrays<'_>,
        args: &[i32],
    ) -> Result<i32, NativeError> {
        let &[array, txoff, chan, len] = args else {
            return Err(arity(4, args.len()));
        };
        let array = byte_array_read(arrays, array, "txarray")?;
        let src = array_range(array, "txarray", "txoff", txoff, len)?;
        let chan = channel(chan)?;
        let max = host.max_message();
        if len as u32 > max {
            return Err(too_long(len, max));
        }
        host.transmit(chan, src).map_err(refused)?;
        Ok(0)
    }
}

/// `txPush` at a tail site ([`jive::TAIL_SUFFIX`]): bound as
/// `txPush#tail`, which the decoder calls only where nothing can write the
/// array before the invocation ends. The same checks in the same order as
/// [`TxPush`], then [`NativeHost::transmit_tail`] with the array's handle
/// and offset, so that the host may read the message at the invocation's
/// end instead of copying it now. Its checks are written out rather than
/// shared with [`TxPush::run`] through a helper: the shared form counted 3
/// to 6 instructions more per message (`unet-count` standard-40).
struct TxPushTail;

impl EndpointNative for TxPushTail {
    const NAME: &'static str = "txPush#tail";
    const DESCRIPTOR: &'static str = "([BIII)V";
    const ARGS: usize = 4;
    fn cost(args: &[i32]) -> usize {
        args[3].max(0) as usize
    }
    /// Always inlined into its fast form's entry, as [`TxPush::run`] is.
    #[inline(always)]
    fn run<H: NativeHost>(
        host: &mut H,
        arrays: Arrays<'_>,
        args: &[i32],
    ) -> Result<i32, NativeError> {
        let &[handle, txoff, chan, len] = args else {
            return Err(arity(4, args.len()));
        };
        let array = byte_array_read(arrays, handle, "txarray")?;
        let src = array_range(array, "txarray", "txoff", txoff, len)?;
        let chan = channel(chan)?;
        let max = host.max_message();
        if len as u32 > max {
            return Err(too_long(len, max));
        }
        // `array_range` checked `txoff >= 0`.
        host.transmit_tail(chan, src, || (args[0], args[1] as u32))
            .map_err(refused)?;
        Ok(0)
    }
}

/// `dmaRxd`'s inline form ([`jive::InlineForm::PushEntry`]): a message
/// in one buffer, whose descriptor the generated code writes in the
/// receive queue's lent run (the run `dmaRxdPayload`'s inline form writes).
/// Its checks are `dmaRxd`'s own for that case: the offsets array is
/// the descriptor's `int[]` of [`RX_OFFSETS`]; `1 <= len <= buffer_size`
/// (the free queue's words lend `align` as `buffer_size - 1`), so that
/// one buffer holds it and `len` is within `RX_OFFSETS * buffer_size`;
/// the channel is at most 0xffff; and the one offset is below the area's
/// length with no bit of `buffer_size - 1` set (the free queue's words
/// lend those bounds), which for a power-of-two buffer size in an area of
/// whole buffers ([`crate::layout::Config::validate`]) is `o % size == 0
/// && o + size <= area`. Any other call runs the native.
pub const RX_ONE_BUFFER: jive::InlineForm = jive::InlineForm::PushEntry(RX_OFFSETS as u8);

/// `dmaRxd(int[] offsets, int chan, int len)`.
struct DmaRxd;

impl EndpointNative for DmaRxd {
    const NAME: &'static str = "dmaRxd";
    const DESCRIPTOR: &'static str = "([III)V";
    const ARGS: usize = 3;
    fn cost(_: &[i32]) -> usize {
        0
    }
    #[inline]
    fn run<H: NativeHost>(
        host: &mut H,
        arrays: Arrays<'_>,
        args: &[i32],
    ) -> Result<i32, NativeError> {
        let &[offsets, chan, len] = args else {
            return Err(arity(3, args.len()));
        };
        if offsets == 0 {
            return Err(null_array("offsets"));
        }
        let offsets = arrays
            .into_ints(offsets)
            .map_err(|e| bad_array("offsets", e))?;
        if offsets.len() != RX_OFFSETS {
            return Err(offsets_length(offsets.len()));
        }
        let size = u64::from(host.buffer_size());
        let area = u64::from(host.area_len());
        if len < 0 || len as u64 > RX_OFFSETS as u64 * size {
            return Err(rx_too_long(len, size));
        }
        let chan = channel(chan)?;
        // `size` > 0 here unless len == 0, which needs no buffers.
        let n = (len as u64).div_ceil(size.max(1)) as usize;
        let mut checked = [0u32; RX_OFFSETS];
        for (i, (&o, c)) in offsets.iter().zip(&mut checked).take(n).enumerate() {
            if o < 0 || !(o as u64).is_multiple_of(size) || o as u64 + size > area {
                return Err(bad_offset(i, o, size, area));
            }
            *c = o as u32;
        }
        host.push_rx(chan, len as u32, RxBody::Buffers(&checked[..n]))
            .map_err(refused)?;
        Ok(0)
    }
}

/// `dmaRxdPayload(byte[] payload, int chan, int len)`.
struct DmaRxdPayload;

impl EndpointNative for DmaRxdPayload {
    const NAME: &'static str = "dmaRxdPayload";
    const DESCRIPTOR: &'static str = "([BII)V";
    const ARGS: usize = 3;
    fn cost(args: &[i32]) -> usize {
        args[2].max(0) as usize
    }
    #[inline]
    fn run<H: NativeHost>(
        host: &mut H,
        arrays: Arrays<'_>,
        args: &[i32],
    ) -> Result<i32, NativeError> {
        let &[payload, chan, len] = args else {
            return Err(arity(3, args.len()));
        };
        let payload = byte_array_read(arrays, payload, "payload")?;
        if len < 0 || len as usize > INLINE_MAX {
            return Err(inline_too_long(len));
        }
        if len as usize > payload.len() {
            return Err(past_payload(len, payload.len()));
        }
        // The payload's bytes as the host's `u8`s, in place (the descriptor
        // push copies them once).
        let src: &[u8] = bytemuck::cast_slice(&payload[..len as usize]);
        let chan = channel(chan)?;
        host.push_rx(chan, len as u32, RxBody::Inline(src))
            .map_err(refused)?;
        Ok(0)
    }
}

/// `getFreeBuffer()`.
struct GetFreeBuffer;

impl EndpointNative for GetFreeBuffer {
    const NAME: &'static str = "getFreeBuffer";
    const DESCRIPTOR: &'static str = "()I";
    const ARGS: usize = 0;
    fn cost(_: &[i32]) -> usize {
        0
    }
    #[inline]
    fn run<H: NativeHost>(host: &mut H, _: Arrays<'_>, _: &[i32]) -> Result<i32, NativeError> {
        match host.pop_free() {
            None => Ok(-1),
            Some(off) => i32::try_from(off).map_err(|_| huge_offset(off)),
        }
    }
}

/// `getFreeBufferLength()`.
struct GetFreeBufferLength;

impl EndpointNative for GetFreeBufferLength {
    const NAME: &'static str = "getFreeBufferLength";
    const DESCRIPTOR: &'static str = "()I";
    const ARGS: usize = 0;
    fn cost(_: &[i32]) -> usize {
        0
    }
    #[inline]
    fn run<H: NativeHost>(host: &mut H, _: Arrays<'_>, _: &[i32]) -> Result<i32, NativeError> {
        let size = host.buffer_size();
        i32::try_from(size).map_err(|_| huge_buffer(size))
    }
}

/// `newAlignedArray(int nbytes)`. jive arrays have no address an applet can
/// see, so every array is "aligned for DMA"; what remains is a zeroed
/// `byte[]` within the heap budget.
fn new_aligned_array(cx: &mut Context<'_>, args: &[i32]) -> Result<i32, NativeError> {
    let &[nbytes] = args else {
        return Err(arity(1, args.len()));
    };
    if nbytes < 0 {
        return Err(negative("nbytes", nbytes));
    }
    cx.new_array(Prim::Byte, nbytes)
        .map_err(|e| with_arg("nbytes", nbytes, e))
}

// ---------------------------------------------------------------------------
// Checks.

/// The `byte[]` behind `handle`, or an error naming the argument.
#[inline]
fn byte_array<'a>(
    arrays: Arrays<'a>,
    handle: i32,
    what: &str,
) -> Result<&'a mut [i8], NativeError> {
    if handle == 0 {
        return Err(null_array(what));
    }
    arrays.into_bytes(handle).map_err(|e| bad_array(what, e))
}

/// [`byte_array`] for a native that only reads the array: the lent one
/// ([`jive::Applet::lend`]) too.
#[inline]
fn byte_array_read<'a>(
    arrays: Arrays<'a>,
    handle: i32,
    what: &str,
) -> Result<&'a [i8], NativeError> {
    if handle == 0 {
        return Err(null_array(what));
    }
    arrays
        .into_bytes_read(handle)
        .map_err(|e| bad_array(what, e))
}

/// `array[off..off+len)`, checking `len >= 0`, `off >= 0` and
/// `off + len <= array.len()` (in 64 bits); of an array to change or to
/// read ([`Bytes`]).
#[inline]
fn array_range<'a, B: Bytes<'a>>(
    array: B,
    name: &str,
    off_name: &str,
    off: i32,
    len: i32,
) -> Result<B, NativeError> {
    if len < 0 {
        return Err(negative("len", len));
    }
    if off < 0 {
        return Err(negative(off_name, off));
    }
    let (start, end) = (off as usize, off as u64 + len as u64);
    if end > array.len() as u64 {
        return Err(past_array(name, off_name, off, len, array.len()));
    }
    Ok(array.range(start, end as usize))
}

/// A native's `byte[]`: to change (`&mut`) or to read (`&`).
trait Bytes<'a>: Sized {
    fn len(&self) -> usize;
    /// `self[start..end]`; the caller checked `start <= end <= len`.
    fn range(self, start: usize, end: usize) -> Self;
}

impl<'a> Bytes<'a> for &'a mut [i8] {
    #[inline(always)]
    fn len(&self) -> usize {
        <[i8]>::len(self)
    }
    #[inline(always)]
    fn range(self, start: usize, end: usize) -> Self {
        &mut self[start..end]
    }
}

impl<'a> Bytes<'a> for &'a [i8] {
    #[inline(always)]
    fn len(&self) -> usize {
        <[i8]>::len(self)
    }
    #[inline(always)]
    fn range(self, start: usize, end: usize) -> Self {
        &self[start..end]
    }
}

/// `off` as an area offset, checking `off >= 0` and `off + len <= area`
/// (in 64 bits). `len` has been checked to be non-negative.
#[inline]
fn area_range(area: u32, name: &str, off: i32, len: i32) -> Result<u32, NativeError> {
    if off < 0 {
        return Err(negative(name, off));
    }
    if off as u64 + len as u64 > u64::from(area) {
        return Err(past_area(name, off, len, area));
    }
    Ok(off as u32)
}

/// A channel tag: 0..=65535.
#[inline]
fn channel(chan: i32) -> Result<u16, NativeError> {
    u16::try_from(chan).map_err(|_| bad_channel(chan))
}

// ---------------------------------------------------------------------------
// Moving bytes between jive's `[i8]` and the host's `[u8]`.

/// `dst[i] = src[i] as u8`, for equal lengths: one `memcpy` of `src`
/// viewed as bytes. (A conversion loop is vectorized where it is inlined,
/// but a copy of 64 KiB through it runs at a fraction of `memcpy`'s speed.)
#[inline]
pub fn i8_to_u8(dst: &mut [u8], src: &[i8]) {
    dst.copy_from_slice(bytemuck::cast_slice(src));
}

/// `dst[i] = src[i] as i8`, for equal lengths (one `memcpy`).
#[inline]
pub fn u8_to_i8(dst: &mut [i8], src: &[u8]) {
    bytemuck::cast_slice_mut(dst).copy_from_slice(src);
}

// ---------------------------------------------------------------------------
// Error messages, built only on the failure paths. jive prefixes each with
// the native's name and descriptor.

#[cold]
#[inline(never)]
fn error(args: fmt::Arguments<'_>) -> NativeError {
    NativeError(args.to_string())
}

#[cold]
#[inline(never)]
fn arity(expected: usize, given: usize) -> NativeError {
    error(format_args!("expected {expected} arguments, got {given}"))
}

#[cold]
#[inline(never)]
fn negative(name: &str, value: i32) -> NativeError {
    error(format_args!("{name} {value} is negative"))
}

#[cold]
#[inline(never)]
fn null_array(name: &str) -> NativeError {
    error(format_args!("{name} is null"))
}

#[cold]
#[inline(never)]
fn bad_array(name: &str, e: NativeError) -> NativeError {
    error(format_args!("{name}: {}", e.0))
}

#[cold]
#[inline(never)]
fn with_arg(name: &str, value: i32, e: NativeError) -> NativeError {
    error(format_args!("{name} {value}: {}", e.0))
}

#[cold]
#[inline(never)]
fn past_array(name: &str, off_name: &str, off: i32, len: i32, size: usize) -> NativeError {
    error(format_args!(
        "{off_name} {off} + len {len} exceeds {name} ({size} bytes)"
    ))
}

#[cold]
#[inline(never)]
fn past_area(name: &str, off: i32, len: i32, area: u32) -> NativeError {
    error(format_args!(
        "{name} {off} + len {len} exceeds the buffer area ({area} bytes)"
    ))
}

#[cold]
#[inline(never)]
fn writes_held(off: u32, len: usize, held: core::ops::Range<u32>) -> NativeError {
    error(format_args!(
        "useroff {off} + len {len} writes over the message lent to doTx (area bytes {}..{})",
        held.start, held.end
    ))
}

#[cold]
#[inline(never)]
fn bad_channel(chan: i32) -> NativeError {
    error(format_args!("chan {chan} is not a channel tag (0..=65535)"))
}

#[cold]
#[inline(never)]
fn too_long(len: i32, max: u32) -> NativeError {
    error(format_args!(
        "len {len} exceeds the endpoint's maximum message size ({max} bytes)"
    ))
}

#[cold]
#[inline(never)]
fn refused(e: HostError) -> NativeError {
    error(format_args!("{e}"))
}

#[cold]
#[inline(never)]
fn offsets_length(len: usize) -> NativeError {
    error(format_args!(
        "offsets has {len} words; a receive descriptor takes exactly {RX_OFFSETS}"
    ))
}

#[cold]
#[inline(never)]
fn rx_too_long(len: i32, size: u64) -> NativeError {
    if len < 0 {
        return negative("len", len);
    }
    error(format_args!(
        "len {len} exceeds {RX_OFFSETS} buffers of {size} bytes ({} bytes)",
        RX_OFFSETS as u64 * size
    ))
}

#[cold]
#[inline(never)]
fn bad_offset(i: usize, off: i32, size: u64, area: u64) -> NativeError {
    if off < 0 {
        error(format_args!("offsets[{i}] = {off} is negative"))
    } else if !(off as u64).is_multiple_of(size) {
        error(format_args!(
            "offsets[{i}] = {off} is not a buffer boundary (a multiple of the buffer size, {size})"
        ))
    } else {
        error(format_args!(
            "offsets[{i}] = {off}: the buffer [{off}, {}) exceeds the buffer area ({area} bytes)",
            off as u64 + size
        ))
    }
}

#[cold]
#[inline(never)]
fn inline_too_long(len: i32) -> NativeError {
    if len < 0 {
        return negative("len", len);
    }
    error(format_args!(
        "len {len} exceeds the inline payload of a receive descriptor ({INLINE_MAX} bytes)"
    ))
}

#[cold]
#[inline(never)]
fn past_payload(len: i32, size: usize) -> NativeError {
    error(format_args!("len {len} exceeds payload ({size} bytes)"))
}

#[cold]
#[inline(never)]
fn huge_offset(off: u32) -> NativeError {
    error(format_args!(
        "the free queue gave offset {off}, which an int cannot hold"
    ))
}

#[cold]
#[inline(never)]
fn huge_buffer(size: u32) -> NativeError {
    error(format_args!(
        "the endpoint's buffer size {size} does not fit an int"
    ))
}

#[cfg(test)]
mod tests {
    //! The table, the binding and the messages; the natives' behaviour is
    //! specified with a mock endpoint in `tests/natives.rs`.

    use super::*;

    #[test]
    fn natives_table_lists_the_papers_eight_natives_once() {
        let mut names: Vec<_> = NATIVES.iter().map(|n| n.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), 8);
        for n in NATIVES {
            assert!(n.java.contains(n.name), "{}: {}", n.name, n.java);
        }
    }

    struct Null;
    impl NativeHost for Null {
        fn buffer_size(&self) -> u32 {
            0
        }
        fn area_len(&self) -> u32 {
            0
        }
        fn read_area(&self, _: u32, _: &mut [i8]) {}
        fn write_area(&mut self, _: u32, _: &[i8]) {}
        fn pop_free(&mut self) -> Option<u32> {
            None
        }
        fn push_rx(&mut self, _: u16, _: u32, _: RxBody<'_>) -> Result<(), HostError> {
            Ok(())
        }
        fn transmit(&mut self, _: u16, _: &[i8]) -> Result<(), HostError> {
            Ok(())
        }
        fn max_message(&self) -> u32 {
            0
        }
    }

    #[test]
    fn bind_registers_exactly_the_table() {
        let natives = bind::<Null>();
        for n in NATIVES {
            assert!(
                natives.get(n.name, n.descriptor).is_some(),
                "{}{} not bound",
                n.name,
                n.descriptor
            );
        }
        assert_eq!(dump_names().count(), NATIVES.len());
        // Exactly the natives that only read their byte[] take a lent one.
        for (name, descriptor) in dump_names().chain([("txPush#tail", "([BIII)V")]) {
            let sig = jive::subset::parse_method_descriptor(descriptor).unwrap();
            for p in 0..sig.params.len() as u16 {
                assert_eq!(
                    natives.reads_only(name, descriptor, p),
                    READS_ONLY.contains(&(name, descriptor, p)),
                    "{name}{descriptor} parameter {p}"
                );
            }
        }
        assert!(!natives.reads_only("doHtoLDMA", "([BIII)V", 0));
        // A descriptor that differs is a different native.
        assert!(natives.get("txPush", "([BII)V").is_none());
    }

    #[test]
    fn every_applet_declares_only_natives_of_the_table_with_their_descriptors() {
        for &(name, bytes) in crate::applets::ALL {
            let prog = jive::check(bytes, &jive::Limits::default()).expect(name);
            for d in &prog.natives {
                assert!(
                    NATIVES
                        .iter()
                        .any(|n| n.name == d.name && n.descriptor == d.descriptor),
                    "{name} declares {}{}",
                    d.name,
                    d.descriptor
                );
            }
        }
    }

    #[test]
    fn the_descriptors_are_figure_2s() {
        // RawUnet, Figure 2's text, declares all eight.
        let prog = jive::check(crate::applets::SIMPLE, &jive::Limits::default()).unwrap();
        // The declared natives, not the tail sites' second entries.
        let mut declared: Vec<_> = prog
            .natives
            .iter()
            .filter(|d| !d.tail)
            .map(|d| (d.name.as_str(), d.descriptor.as_str()))
            .collect();
        declared.sort_unstable();
        let mut table: Vec<_> = dump_names().collect();
        table.sort_unstable();
        assert_eq!(declared, table);
    }

    #[test]
    fn range_checks_compute_without_overflow() {
        let mut a = [0i8; 16];
        assert_eq!(array_range(&mut a[..], "a", "off", 8, 8).unwrap().len(), 8);
        let e = array_range(&mut a[..], "a", "off", i32::MAX, i32::MAX).unwrap_err();
        assert_eq!(e.0, "off 2147483647 + len 2147483647 exceeds a (16 bytes)");
        assert_eq!(
            area_range(u32::MAX, "useroff", 0x7fff_ff00, 0x200).unwrap(),
            0x7fff_ff00
        );
        let e = area_range(0x8000_0000, "useroff", 0x7fff_ff00, 0x200).unwrap_err();
        assert_eq!(
            e.0,
            "useroff 2147483392 + len 512 exceeds the buffer area (2147483648 bytes)"
        );
        assert_eq!(area_range(8192, "useroff", 8192, 0).unwrap(), 8192);
        assert!(area_range(8192, "useroff", 8192, 1).is_err());
    }

    #[test]
    fn channel_tags_are_u16() {
        assert_eq!(channel(0).unwrap(), 0);
        assert_eq!(channel(65535).unwrap(), 65535);
        assert_eq!(
            channel(65536).unwrap_err().0,
            "chan 65536 is not a channel tag (0..=65535)"
        );
        assert!(channel(-1).is_err());
    }

    #[test]
    fn conversions_keep_every_bit_pattern() {
        let bytes: Vec<u8> = (0..=255).collect();
        let mut signed = vec![0i8; 256];
        u8_to_i8(&mut signed, &bytes);
        assert_eq!(signed[255], -1);
        assert_eq!(signed[128], i8::MIN);
        let mut back = vec![0u8; 256];
        i8_to_u8(&mut back, &signed);
        assert_eq!(back, bytes);
    }

    #[test]
    fn host_errors_say_what_and_where() {
        assert_eq!(
            HostError::NoSuchChannel(9).to_string(),
            "channel 9 is not an open channel of this endpoint"
        );
        assert_eq!(
            HostError::TooLong {
                len: 9000,
                max: 1500
            }
            .to_string(),
            "a message of 9000 bytes exceeds the endpoint's maximum message size (1500 bytes)"
        );
        assert_eq!(
            HostError::RxQueueFull.to_string(),
            "the endpoint's receive queue is full"
        );
    }
}
