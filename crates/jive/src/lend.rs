//! A `byte[]` lent to invocations: the host's own bytes (a message where
//! it arrived, another endpoint's shared memory) passed to a method as its
//! `byte[]` parameter without a copy, valid while the lend lasts.
//!
//! This is the runtime's half, per invocation. Not to be confused with
//! [`crate::lent`] (one letter apart), the verifier's half: the proof, at
//! load, that a method declared lent only reads the array.
//!
//! # Who guarantees what
//!
//! - **The host** ([`Applet::lend`], `unsafe`): the bytes stay readable,
//!   for their length, until the [`Lend`] is dropped; nothing in its
//!   process writes them through a Rust reference meanwhile. They may
//!   change under the applet (another process's memory): the applet reads
//!   them as plain bytes and assumes nothing of them.
//! - **The verifier** (where the host declared the parameter lent at
//!   load): the method only reads the array (`baload`, `arraylength`, a
//!   compare, a native that declares the parameter read-only) and never
//!   keeps it (no field, no return, no other method). Generated code pays
//!   nothing for it: the lent array is an ordinary directory entry
//!   ([`crate::heap::LENT`]).
//! - **The runtime** (this module and [`crate::heap`]): one lend at a
//!   time ([`LendError::AlreadyLent`]); the lend ends when the [`Lend`]
//!   is dropped, whatever the invocations did (returned, trapped); after
//!   it the handle reads as an empty `byte[]` in both engines, so a
//!   handle kept past the lend reaches no byte until the next lend (the
//!   handle is one for every lend: keeping it is what the verifier
//!   refuses); the interpreter and the
//!   natives' mutable accessor ([`crate::Arrays::bytes`]) refuse to write
//!   it (a defence beside the verifier's; the JIT's `bastore` relies on
//!   the verifier).
//!
//! # Cost
//!
//! A lend is two stores into the lent array's directory entry (and a flag)
//! before the invocation and as many after; the invocation is a prepared
//! one ([`Applet::run_prepared`]) with the handle in the parameter's
//! slot. A method that is not lent pays nothing.

use crate::heap::{LENT, LendError};
use crate::subset::{FieldType, Prim};
use crate::{Applet, Called, FastNative, InvokeError, Method, Prepared, jit};

/// [`PreparedLending`]'s `P` where the lent parameter's index is known
/// only at run time (the handle's [`PreparedLending::param`]).
pub const ANY_PARAM: usize = usize::MAX;

/// A method prepared for invocations with a lent `byte[]` (its parameter
/// `param`), run through a [`Lend`] ([`Lend::run_prepared`]): a
/// [`Prepared`] handle whose lent argument the lend supplies, so that no
/// host can pass a forged handle in its place.
///
/// `P`: the lent parameter's index where the host's code knows it when
/// it is compiled ([`Applet::prepare_lending_lent_at`]), so that the lent
/// handle goes into its argument with no choice made per invocation;
/// [`ANY_PARAM`] (the default) where it does not, and each argument is
/// chosen by the index (`lent_arg`).
pub struct PreparedLending<const N: usize, K = (), const P: usize = ANY_PARAM> {
    p: Prepared<N, K>,
    /// The lent parameter's index among the `N` arguments (`P`, where `P`
    /// is not [`ANY_PARAM`]).
    param: usize,
}

impl<const N: usize, K, const P: usize> Clone for PreparedLending<N, K, P> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<const N: usize, K, const P: usize> Copy for PreparedLending<N, K, P> {}

impl<const N: usize, K, const P: usize> core::fmt::Debug for PreparedLending<N, K, P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PreparedLending")
            .field("p", &self.p)
            .field("param", &self.param)
            .finish()
    }
}

impl<const N: usize, K, const P: usize> PreparedLending<N, K, P> {
    /// The resolved method, for this module's runs alone: its lent slot
    /// takes an int, so that handed to [`Applet::call`] it would take any
    /// handle a host wrote there, which the JIT's array code trusts
    /// (review26). A [`Lend`] puts [`LENT`] there.
    pub(crate) fn method(&self) -> &Method {
        self.p.method()
    }

    /// The lent parameter's index among the arguments.
    pub fn param(&self) -> usize {
        self.param
    }

    /// The lent parameter's index as `lent_arg` takes it: `P`, a
    /// constant, where it is not [`ANY_PARAM`] (then it is `param`: the
    /// handle was prepared for parameter `P`, `Applet::prepare_lending_for`),
    /// so that the choice of each argument folds away when the host's code
    /// is compiled.
    #[inline(always)]
    fn lent_index(&self) -> usize {
        if P == ANY_PARAM {
            self.param
        } else {
            debug_assert_eq!(self.param, P);
            P
        }
    }
}

/// An active lend of bytes to an applet's invocations ([`Applet::lend`]):
/// its prepared methods run with the bytes as their lent `byte[]`
/// ([`Lend::run_prepared`]) as often as the host likes; dropping it ends
/// the lend. It borrows the applet, so that nothing else runs it or
/// replaces it meanwhile; [`Lend::applet`] reads it (a host that resolves
/// a deferred transmission after the invocation reads the message there,
/// [`crate::heap::Heap::bytes_read`], before it ends the lend).
#[must_use = "dropping the lend ends it"]
pub struct Lend<'a> {
    applet: &'a mut Applet,
}

impl Applet {
    /// Resolves the method `name`, whose parameter `param` (counted from
    /// 0 among its declared parameters, as in the descriptor) is a `byte[]`
    /// the host lends ([`Applet::lend`]), for [`Lend::run_prepared`] with
    /// `N` arguments (the lent one among them: its value is the lend's).
    /// Its other parameters are ints, as for [`Applet::prepare`].
    pub fn prepare_lending<const N: usize>(
        &self,
        name: &str,
        param: u16,
    ) -> Result<PreparedLending<N>, InvokeError> {
        self.prepare_lending_for(name, param, true)
    }

    /// [`Applet::prepare_lending`] with the lender of words `W` of a typed
    /// host, for [`Lend::run_prepared_lent`] ([`Applet::prepare_lent`]).
    pub fn prepare_lending_lent<W: FastNative, const N: usize>(
        &self,
        name: &str,
        param: u16,
    ) -> Result<PreparedLending<N, W>, InvokeError> {
        self.prepare_lending_for(name, param, true)
    }

    /// [`Applet::prepare_lending`] without the check that the verifier
    /// proved the method's uses of the parameter reads
    /// ([`Applet::declared_lent`]): for tests of the runtime's own
    /// defences (a method that keeps the array past the lend).
    ///
    /// # Safety
    /// The method (and every method it calls with the array) never writes
    /// the lent array through compiled code: no `bastore` into it, and no
    /// inline native that writes its array is given it (the interpreter
    /// and the natives' accessors refuse such writes themselves; the JIT's
    /// code does not check); and if it keeps the array's handle (in a
    /// field), no method runs during a later lend that writes through the
    /// kept handle, which then names that lend's bytes (review26: the
    /// handle is one for every lend).
    #[doc(hidden)]
    pub unsafe fn prepare_lending_unverified<const N: usize>(
        &self,
        name: &str,
        param: u16,
    ) -> Result<PreparedLending<N>, InvokeError> {
        self.prepare_lending_for(name, param, false)
    }

    /// [`Applet::prepare_lending_lent`] of a method whose lent parameter
    /// `P` the host's code knows when it is compiled (an engine's `doRx`
    /// and `doTx`, whose message is their first parameter): the handle's
    /// invocations put the lent handle in argument `P` with no choice of
    /// each argument by the index (some ten instructions an invocation,
    /// `unet-count dorx-lent-null`). The same checks, of parameter `P`.
    pub fn prepare_lending_lent_at<W: FastNative, const N: usize, const P: usize>(
        &self,
        name: &str,
    ) -> Result<PreparedLending<N, W, P>, InvokeError> {
        const { assert!(P < N && N <= Method::MAX_ARGS) };
        self.prepare_lending_for(name, P as u16, true)
    }

    /// The handle of method `name` with its parameter `param` lent: `P`
    /// is [`ANY_PARAM`], or `param` (refused otherwise, so that a handle
    /// whose `P` is an index always lends that parameter).
    fn prepare_lending_for<K: jit::HostKind, const N: usize, const P: usize>(
        &self,
        name: &str,
        param: u16,
        verified: bool,
    ) -> Result<PreparedLending<N, K, P>, InvokeError> {
        let (idx, m) = self.invocable(name)?;
        let i = usize::from(param);
        if m.sig.params.get(i) != Some(&FieldType::Array(Prim::Byte))
            || (verified && !self.declared_lent(idx, param))
            || (P != ANY_PARAM && P != i)
        {
            return Err(InvokeError::NotLent {
                method: m.id(),
                param,
            });
        }
        let m = self.method_lending(name, Some(i))?;
        if m.arity != N {
            return Err(self.refuse(&m, N));
        }
        let mut p = Prepared {
            m,
            word: 0,
            kind: core::marker::PhantomData,
        };
        self.ready_again(&mut p);
        Ok(PreparedLending { p, param: i })
    }

    /// Whether the host declared parameter `param` of the method at `idx`
    /// lent when it loaded the applet ([`crate::LentParam`],
    /// [`Applet::load_lending`]), so that the verifier proved every use of
    /// it a read and no keep ([`crate::lent`]; [`crate::lend`]'s "who
    /// guarantees what").
    fn declared_lent(&self, idx: usize, param: u16) -> bool {
        self.prog.lent_params(idx).contains(&param)
    }

    /// Lends `len` bytes at `data` to this applet's invocations, as the
    /// `byte[]` of methods prepared with [`Applet::prepare_lending`], until
    /// the returned [`Lend`] is dropped. Refused while another lend of
    /// this applet is active ([`LendError::AlreadyLent`]: a lend leaked
    /// with `mem::forget`; nested lends are otherwise impossible, the lend
    /// borrowing the applet) and for more bytes than a `byte[]` holds.
    ///
    /// # Safety
    /// Until the [`Lend`] is dropped (forever, if it is leaked), `data` is
    /// valid for reads of `len` bytes (any address where `len` is 0), and
    /// nothing in this process writes them through a Rust reference. They
    /// may change meanwhile (another process's shared memory): the applet
    /// and its natives read them as plain bytes, and no safety argument
    /// of jive's rests on their values. Nor do they overlap memory the
    /// applet's natives write during the lend (the host's area an inline
    /// copy writes, `InlineForm::CopyIn`'s destination, among them): the
    /// inline copy from the lent array is a `copy_nonoverlapping`.
    ///
    /// ```
    /// # let Some(dir) = jive::APPLET_CLASSES else { return Ok(()) };
    /// # let bytes = std::fs::read(format!("{dir}/default/Lending.class"))?;
    /// # let natives = jive::Natives::new();
    /// // `static int length(byte[] msg, int n) { return msg.length; }`,
    /// // its `msg` declared lent, so that the verifier proves it only read.
    /// let lent = [jive::LentParam { method: "length", descriptor: "([BI)I", param: 0 }];
    /// let limits = jive::Limits::default();
    /// let mut applet = jive::Applet::load_lending(&bytes, &natives, limits, &lent, None)?;
    /// let mut length = applet.prepare_lending::<2>("length", 0)?;
    /// let msg = [1u8, 2, 3];
    /// // SAFETY: `msg` outlives the lend, which ends with the statement;
    /// // nothing writes it.
    /// let c = unsafe { applet.lend(msg.as_ptr(), msg.len()) }?.run_prepared(&mut length, [0, 0], None);
    /// assert_eq!(c.value(), Some(3));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// Always inlined: a host lends once per message, and the call (its
    /// `Result` through memory) cost more than the lend's stores
    /// (`unet-count dorx-lent`).
    #[inline(always)]
    pub unsafe fn lend(&mut self, data: *const u8, len: usize) -> Result<Lend<'_>, LendError> {
        // SAFETY: the caller's promise is `Heap::lend`'s, until the guard
        // made here is dropped, which ends it (`Lend::drop`).
        unsafe { self.heap.lend(data, len) }?;
        Ok(Lend { applet: self })
    }

    /// [`Applet::lend`] of the bytes of `bytes`, whose address a slice
    /// says is not null: the same checks and lend, without
    /// [`Applet::lend`]'s choice of an address for an empty one.
    ///
    /// # Safety
    /// As [`Applet::lend`]'s for `bytes.as_ptr()` and `bytes.len()`: the
    /// bytes stay readable until the [`Lend`] is dropped (the slice's
    /// borrow need not last that long), nothing in this process writes
    /// them through a Rust reference meanwhile, and they do not overlap
    /// memory the applet's natives write during the lend.
    #[inline(always)]
    pub unsafe fn lend_slice(&mut self, bytes: &[u8]) -> Result<Lend<'_>, LendError> {
        let data = core::ptr::NonNull::from(bytes).cast::<u8>();
        // SAFETY: the caller's promise, for the slice's bytes.
        unsafe { self.lend_nonnull(data, bytes.len()) }
    }

    /// [`Applet::lend`] of bytes at an address known not to be null (a
    /// slice's, or an offset into a mapping): the same checks and lend,
    /// without [`Applet::lend`]'s choice of an address for an empty one
    /// (its test of the address and of the length: three instructions an
    /// invocation, unet's lent `doTx`).
    ///
    /// # Safety
    /// As [`Applet::lend`]'s for `data` and `len`.
    #[inline(always)]
    pub unsafe fn lend_nonnull(
        &mut self,
        data: core::ptr::NonNull<u8>,
        len: usize,
    ) -> Result<Lend<'_>, LendError> {
        // SAFETY: the caller's promise is `Heap::lend_nonnull`'s, until
        // the guard made here is dropped, which ends it (`Lend::drop`).
        unsafe { self.heap.lend_nonnull(data, len) }?;
        Ok(Lend { applet: self })
    }
}

impl Lend<'_> {
    /// Invokes a method prepared for the lend ([`Applet::prepare_lending`])
    /// with the lent bytes as its lent parameter (whatever `args` holds
    /// there) and `args` as the others: [`Applet::run_prepared`], with
    /// its semantics, checks and outcome.
    #[inline(always)]
    pub fn run_prepared<const N: usize, const P: usize>(
        &mut self,
        p: &mut PreparedLending<N, (), P>,
        mut args: [i32; N],
        host: Option<&mut dyn core::any::Any>,
    ) -> Called {
        lent_arg(&mut args, p.lent_index());
        self.applet.run_prepared(&mut p.p, args, host)
    }

    /// [`Lend::run_prepared`] with the host typed ([`Applet::run_prepared_lent`]).
    #[inline(always)]
    pub fn run_prepared_lent<W: FastNative, const N: usize, const P: usize>(
        &mut self,
        p: &mut PreparedLending<N, W, P>,
        mut args: [i32; N],
        host: &mut W::Host,
    ) -> Called {
        lent_arg(&mut args, p.lent_index());
        self.applet.run_prepared_lent(&mut p.p, args, host)
    }

    /// [`Applet::call`] of a method prepared for the lend, with the lent
    /// bytes as its lent parameter: its whole outcome (value and fuel) or
    /// error, for a host that wants them rather than a [`Called`].
    pub fn call<const N: usize, K, const P: usize>(
        &mut self,
        p: &PreparedLending<N, K, P>,
        mut args: [i32; N],
        host: Option<&mut dyn core::any::Any>,
    ) -> Result<crate::Outcome, InvokeError> {
        lent_arg(&mut args, p.lent_index());
        self.applet.call(p.method(), &args, host)
    }

    /// [`Lend::run_prepared_lent`] with the invocation's body inlined
    /// ([`Applet::run_prepared_lent_inlined`]).
    #[inline(always)]
    pub fn run_prepared_lent_inlined<W: FastNative, const N: usize, const P: usize>(
        &mut self,
        p: &mut PreparedLending<N, W, P>,
        mut args: [i32; N],
        host: &mut W::Host,
    ) -> Called {
        lent_arg(&mut args, p.lent_index());
        self.applet.run_prepared_lent_inlined(&mut p.p, args, host)
    }

    /// The applet, to read (e.g. its heap: [`crate::heap::Heap::bytes_read`]
    /// of the lent handle reads the lent bytes while the lend lasts).
    pub fn applet(&self) -> &Applet {
        self.applet
    }

    /// [`Applet::take_error`]: why the last failed invocation failed.
    pub fn take_error(&mut self) -> Option<Box<InvokeError>> {
        self.applet.take_error()
    }
}

/// The lent handle in the lent parameter's argument (`param < N`, checked
/// when the handle was prepared). Each argument is chosen by value (a
/// compare and a conditional move where `param` is not known), not
/// stored through an index: a store into the array at a run-time index
/// keeps the arguments in memory, where the invocation's copy into its
/// slots then reads two of them in one 8-byte load that is not forwarded
/// from the 4-byte stores made just before (docs/benchmarks.md,
/// "Store-forwarding stalls on the applet's path").
#[inline(always)]
fn lent_arg<const N: usize>(args: &mut [i32; N], param: usize) {
    *args = core::array::from_fn(|i| if i == param { LENT } else { args[i] });
}

impl Drop for Lend<'_> {
    /// Ends the lend: the lent handle reads as an empty `byte[]` again.
    #[inline(always)]
    fn drop(&mut self) {
        self.applet.heap.end_lend();
    }
}
