//! [`Pipeline`]: a compiled, cached step list, and the one place that
//! calls generated code.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use crate::codegen::{Frame, generate, key_period};
use crate::error::Error;
use crate::state::{Outputs, State, fold64};
use crate::step::{Step, StepKind, validate};

/// Longest buffer a run accepts (far beyond any real message; a bound
/// that keeps every pointer computation of the loop in range).
pub const MAX_LEN: usize = 1 << 46;

/// Generated code for one list of step kinds.
struct Compiled {
    code: vcode::Code,
    entry: extern "C" fn(*mut Frame),
    /// The code has a 512-bit loop, which stores best to a 64-byte aligned
    /// `dst` (see [`Pipeline::head_len`]).
    wide: bool,
    /// The 512-bit CRC loop aligns its own stores with a masked head (with
    /// ordinary stores, when `dst % 64` is 4 to 60: see `codegen::masked_head`).
    masked_head: bool,
}

type Cache = Mutex<HashMap<(Vec<StepKind>, Vectors), Arc<Compiled>>>;

fn cache() -> &'static Cache {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// An ordered list of steps compiled into one loop.
///
/// Built with [`Pipeline::new`], which validates the list and fetches the
/// loop from a process-wide cache keyed by the step kinds (generating it on
/// first use); clones and pipelines of the same kinds share the code.
///
/// ```
/// use ilp::{Pipeline, State, Step};
/// let p = Pipeline::new(&[Step::Copy, Step::Checksum, Step::Bswap32])?;
/// let src = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
/// let mut dst = [0u8; 8];
/// let out = p.run(&src, &mut dst, &mut State::new())?;
/// assert_eq!(out.checksum, Some(!0xddf2)); // RFC 1071's example
/// assert_eq!(dst, [0x03, 0xf2, 0x01, 0x00, 0xf7, 0xf6, 0xf5, 0xf4]);
/// # Ok::<(), ilp::Error>(())
/// ```
#[derive(Clone)]
pub struct Pipeline {
    steps: Vec<Step>,
    vectors: Vectors,
    compiled: Arc<Compiled>,
    /// The xor key repeated over its period plus one block and a word, so
    /// that the loop reads whole words from any phase.
    key: Option<(Box<[u8]>, usize, usize)>,
    copy: bool,
    checksum: bool,
    crc: bool,
    /// The widest byte swap's unit in bytes (1 without swaps): the swaps
    /// are relative to the buffer's start, so a buffer may be split only
    /// at multiples of it.
    swap_unit: usize,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("steps", &self.steps)
            .field("vectors", &self.vectors)
            .field("code_bytes", &self.compiled.code.len())
            .finish()
    }
}

/// The argument checks every run makes.
pub(crate) fn check_buffers(copy: bool, src: &[u8], dst: &[u8]) -> Result<(), Error> {
    for len in [src.len(), dst.len()] {
        if len > MAX_LEN {
            return Err(Error::TooLong { len, max: MAX_LEN });
        }
    }
    if copy && dst.len() != src.len() {
        return Err(Error::LengthMismatch {
            src: src.len(),
            dst: dst.len(),
        });
    }
    if !copy && !dst.is_empty() {
        return Err(Error::UnexpectedDestination { dst: dst.len() });
    }
    Ok(())
}

impl Pipeline {
    /// Validates `steps` and returns the compiled pipeline (from the cache
    /// when a list of the same kinds was compiled before), its loops in the
    /// widest vector registers the CPU runs ([`Vectors::Widest`]).
    pub fn new(steps: &[Step]) -> Result<Pipeline, Error> {
        Pipeline::with_vectors(steps, Vectors::Widest)
    }

    /// [`new`](Pipeline::new), its loops in vector registers no wider than
    /// `vectors` says: for a CPU that slows down in zmm code, or to run and
    /// test the narrower loops on a CPU that has the wider ones. The result
    /// of a run is the same at every width.
    ///
    /// ```
    /// use ilp::{Pipeline, Step, Vectors};
    /// let p = Pipeline::with_vectors(&[Step::Copy, Step::Checksum], Vectors::Ymm)?;
    /// assert!(!p.disassemble().contains("zmm"));
    /// # Ok::<(), ilp::Error>(())
    /// ```
    pub fn with_vectors(steps: &[Step], vectors: Vectors) -> Result<Pipeline, Error> {
        validate(steps)?;
        let kinds: Vec<StepKind> = steps.iter().map(Step::kind).collect();
        let compiled = {
            let mut map = cache().lock().unwrap_or_else(|e| e.into_inner());
            let key = (kinds, vectors);
            match map.get(&key) {
                Some(c) => c.clone(),
                None => {
                    let (code, wide, masked_head) = generate::<vcode::X64>(&key.0, 0, vectors)?;
                    // SAFETY: `generate` built a function of one pointer
                    // parameter returning nothing, which `as_fn` checks
                    // against this type; what the function does with the
                    // pointer is the contract `invoke` keeps.
                    let entry = unsafe { code.as_fn::<extern "C" fn(*mut Frame)>()? };
                    let c = Arc::new(Compiled {
                        code,
                        entry,
                        wide,
                        masked_head,
                    });
                    map.insert(key, c.clone());
                    c
                }
            }
        };
        let key = steps.iter().find_map(|s| match s {
            Step::Xor(k) => {
                let period = key_period(k.len());
                let buf: Box<[u8]> = (0..period + 64 + 8).map(|i| k[i % k.len()]).collect();
                Some((buf, k.len(), period))
            }
            _ => None,
        });
        Ok(Pipeline {
            steps: steps.to_vec(),
            vectors,
            compiled,
            key,
            copy: steps.contains(&Step::Copy),
            checksum: steps.contains(&Step::Checksum),
            crc: steps.contains(&Step::Crc32),
            swap_unit: if steps.contains(&Step::Bswap32) {
                4
            } else if steps.contains(&Step::Bswap16) {
                2
            } else {
                1
            },
        })
    }

    /// The steps, as given.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// The widest vector registers its loops were allowed (see
    /// [`with_vectors`](Pipeline::with_vectors)).
    pub fn vectors(&self) -> Vectors {
        self.vectors
    }

    /// True if `other` runs the same generated code (the cache hit).
    pub fn shares_code_with(&self, other: &Pipeline) -> bool {
        Arc::ptr_eq(&self.compiled, &other.compiled)
    }

    /// The generated loop's machine code, disassembled.
    pub fn disassemble(&self) -> String {
        self.compiled.code.disassemble()
    }

    /// Bytes of generated machine code.
    pub fn code_len(&self) -> usize {
        self.compiled.code.len()
    }

    /// Runs the pipeline over `src`, continuing the stream in `state`.
    ///
    /// With [`Step::Copy`] in the list, `dst` must be exactly as long as
    /// `src` and receives the data after every transform; without it, `dst`
    /// must be empty (see also [`scan`](Pipeline::scan)). `state` advances
    /// by `src.len()` bytes, and the result holds the checksum and CRC of
    /// the stream so far. On an error nothing is read or written.
    ///
    /// A copy of at least [`NT_MIN_LEN`] bytes writes `dst` with
    /// non-temporal stores ([`Stores::Auto`]); see
    /// [`run_with`](Pipeline::run_with) to choose.
    pub fn run(&self, src: &[u8], dst: &mut [u8], state: &mut State) -> Result<Outputs, Error> {
        self.run_with(src, dst, state, Stores::Auto)
    }

    /// [`run`](Pipeline::run) with the kind of stores chosen by the
    /// caller: non-temporal stores suit a destination that will not be
    /// read again while it could still be in the cache (a large buffer, or
    /// many buffers streamed through); ordinary stores leave `dst` in the
    /// cache for the next consumer. The results are the same either way.
    pub fn run_with(
        &self,
        src: &[u8],
        dst: &mut [u8],
        state: &mut State,
        stores: Stores,
    ) -> Result<Outputs, Error> {
        check_buffers(self.copy, src, dst)?;
        let nt = stores.non_temporal(src.len());
        let head = self.head_len(src.len(), dst.as_ptr(), nt);
        let (src_head, src) = src.split_at(head);
        let (dst_head, dst) = dst.split_at_mut(head);
        if head > 0 {
            self.call(src_head, dst_head, state, nt);
        }
        Ok(self.call(src, dst, state, nt))
    }

    /// How many bytes to run first, on their own, so that the rest of the
    /// buffer starts at a 64-byte aligned `dst`: the 512-bit loops then
    /// store whole cache lines (`vmovntdq` needs the alignment; ordinary
    /// 64-byte stores that split lines cost about a third more in cache).
    /// The head is `(64 - dst % 64) % 64` bytes and goes through the
    /// narrower code as a buffer of its own, the state carried as between
    /// any two buffers of a stream (the checksum's byte lane by the
    /// offset's parity, the CRC register). Byte swaps are relative to each
    /// buffer's start, so with swaps the head must be a whole number of
    /// units; when it is not (a `dst` at an odd address, or 2 mod 4 with a
    /// 32-bit swap) there is no head and the loops store unaligned, or,
    /// non-temporal, leave the blocks to the 8-byte `movnti` loop. 0 also
    /// without a copy, without a 512-bit loop, when the rest would be
    /// too short for the loop (256 bytes), and for a CRC list with cached
    /// stores below [`CRC_HEAD_MIN_LEN`] or whose generated code takes
    /// the head itself (the 512-bit CRC loop's masked head, for heads of 4
    /// bytes or more).
    fn head_len(&self, len: usize, dst: *const u8, nt: bool) -> usize {
        let head = (64 - dst as usize % 64) % 64;
        let useful = self.copy && self.compiled.wide && head.is_multiple_of(self.swap_unit);
        let masked = self.compiled.masked_head && head >= 4;
        let worth = nt || !self.crc || len >= CRC_HEAD_MIN_LEN && !masked;
        if useful && worth && len >= head + 256 {
            head
        } else {
            0
        }
    }

    /// One call of the generated loop over `src` and `dst` (checked),
    /// continuing `state`, with non-temporal stores when `nt`.
    fn call(&self, src: &[u8], dst: &mut [u8], state: &mut State, nt: bool) -> Outputs {
        let mut frame = self.frame(src, dst, state);
        frame.nt = Stores::flag(nt, dst.as_ptr());
        invoke(self.compiled.entry, &mut frame);
        self.finish(&frame, src.len(), state)
    }

    /// [`run`](Pipeline::run) for a pipeline without a copy step.
    pub fn scan(&self, src: &[u8], state: &mut State) -> Result<Outputs, Error> {
        self.run(src, &mut [], state)
    }

    /// Runs the same client code on vcode's reference backend (every
    /// register and memory use checked, slowly): the debugger and the
    /// oracle of the differential tests. Same contract as
    /// [`run`](Pipeline::run). The portable definitions of the extension
    /// instructions need free registers, so the loop is generated with
    /// fewer words per group; a list that then runs out of registers (one
    /// with a CRC and most other steps) is an [`Error::OutOfRegisters`] or [`Error::Codegen`].
    pub fn run_on_reference_backend(
        &self,
        src: &[u8],
        dst: &mut [u8],
        state: &mut State,
    ) -> Result<Outputs, Error> {
        check_buffers(self.copy, src, dst)?;
        let kinds: Vec<StepKind> = self.steps.iter().map(Step::kind).collect();
        // Temporaries for the portable definitions: `crc32x8` needs four,
        // `add1c4` two.
        let spare = if self.crc {
            4
        } else if self.checksum {
            2
        } else {
            0
        };
        let code = generate::<vcode::Reference>(&kinds, spare, Vectors::Widest)?
            .0
            .with_step_limit(u64::MAX);
        let mut frame = self.frame(src, dst, state);
        let arg = vcode::Value::P(&mut frame as *mut Frame as usize);
        // SAFETY: the frame describes `src`, `dst` (checked to be as long
        // as the copy needs) and the expanded key, all live for the call;
        // the program reads and writes only within them (the same client
        // code as the native loop, whose bounds `invoke` argues).
        unsafe { code.run(&[arg]) }.expect("the reference backend rejected generated code");
        Ok(self.finish(&frame, src.len(), state))
    }

    fn frame(&self, src: &[u8], dst: &mut [u8], state: &State) -> Frame {
        let (key, kend) = match &self.key {
            Some((buf, len, period)) => {
                let phase = (state.offset % *len as u64) as usize;
                // Both stay inside `buf` (phase < len <= period < buf.len()).
                (buf[phase..].as_ptr(), buf[*period..].as_ptr())
            }
            None => (std::ptr::null(), std::ptr::null()),
        };
        Frame {
            src: src.as_ptr(),
            dst: dst.as_mut_ptr(),
            len: src.len() as u64,
            key,
            kend,
            sum: 0,
            crc: !state.crc as u64,
            nt: Stores::flag(Stores::Auto.non_temporal(src.len()), dst.as_ptr()),
            fold_k: crate::codegen::FRAME_FOLD_K,
            fold: [0; 8],
        }
    }

    fn finish(&self, frame: &Frame, len: usize, state: &mut State) -> Outputs {
        let mut out = Outputs::default();
        if self.checksum {
            state.absorb_sum(fold64(frame.sum));
            out.checksum = Some(state.checksum());
        }
        if self.crc {
            state.crc = !(frame.crc as u32);
            out.crc32 = Some(state.crc);
        }
        state.offset += len as u64;
        out
    }
}

/// The length from which [`Stores::Auto`] stores the copy non-temporally:
/// 1 MiB, about the L2 cache of the machines measured in
/// `docs/benchmarks.md` (half a Sapphire Rapids core's 2 MiB, twice a
/// Zen 3 core's 512 KiB): a destination that large leaves the L2 before
/// it is read again anyway, while smaller ones are cheaper to read back
/// from the cache than to write to memory and fetch again. A caller that
/// reads a larger `dst` back soon from a big L3 (on the Zen 3, cached
/// stores stay faster for a buffer reused in place up to about 8 MiB)
/// should ask for [`Stores::Cached`]; one that streams many small buffers
/// through and does not read them back, for [`Stores::NonTemporal`].
pub const NT_MIN_LEN: usize = 1 << 20;

/// The shortest run with a CRC and ordinary stores that takes the head of
/// [`Pipeline::run_with`]: the head's CRC goes through the slicing-by-8
/// table steps, a fixed cost that made copy+crc32 about 10% slower at
/// 4 KiB in cache, while at 64 KiB the aligned stores made it 15% faster
/// (`examples/table4.rs cache`). The checksum head (`adc`) is cheap enough
/// at every length. With the 512-bit CRC loop the generated code aligns
/// its stores itself (a masked head, no table steps), so this applies
/// there only to heads of 1 to 3 bytes.
const CRC_HEAD_MIN_LEN: usize = 16 << 10;

/// The widest vector registers a pipeline's loops may use (see
/// [`Pipeline::with_vectors`]). Each is a ceiling: a CPU without the
/// registers gets the next narrower loops, down to the 64-bit ones.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum Vectors {
    /// zmm (512 bits) on a CPU with AVX-512F and BW, else ymm (256 bits)
    /// with AVX2.
    #[default]
    Widest,
    /// At most ymm (256 bits, AVX2), also on a CPU with AVX-512.
    Ymm,
    /// No ymm or zmm loop: the 64-bit loops, and for a CRC of the
    /// unchanged source the carry-less fold in xmm registers (PCLMULQDQ).
    Xmm,
}

/// How a pipeline with a copy writes `dst` (see
/// [`Pipeline::run_with`]).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum Stores {
    /// Non-temporal from [`NT_MIN_LEN`] bytes on, ordinary below.
    #[default]
    Auto,
    /// Ordinary (cached) stores at any length.
    Cached,
    /// Non-temporal stores (`movnti`, then `sfence`) for the 64-byte
    /// blocks at any length; the last 0 to 63 bytes are stored as usual.
    NonTemporal,
}

impl Stores {
    fn non_temporal(self, len: usize) -> bool {
        match self {
            Stores::Auto => len >= NT_MIN_LEN,
            Stores::Cached => false,
            Stores::NonTemporal => true,
        }
    }

    /// `Frame::nt`: bit 0 non-temporal, bit 1 also a 16-byte aligned
    /// `dst`, bit 2 also a 64-byte aligned one.
    fn flag(nt: bool, dst: *const u8) -> u64 {
        let aligned = |n: usize| (nt && (dst as usize).is_multiple_of(n)) as u64;
        nt as u64 | aligned(16) << 1 | aligned(64) << 2
    }
}

/// Calls a generated loop.
fn invoke(entry: extern "C" fn(*mut Frame), frame: &mut Frame) {
    // The generated loop reads `frame.len` bytes from `frame.src`, writes
    // as many to `frame.dst` when it copies (`check_buffers` made both
    // slices that long), reads the expanded key only at `key + i` for
    // `i < period + 72` (the pointer stays in `[buf, buf + period)` before
    // each read of at most 64 bytes, and the buffer has `period + 72`),
    // and the static CRC tables at indices below 256; and it writes the
    // two outputs into `frame`. The pointer is valid for the call.
    entry(frame as *mut Frame);
}
