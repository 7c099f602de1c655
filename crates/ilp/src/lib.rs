//! Integrated layer processing: the data-touching steps of protocol layers
//! (copy, the Internet checksum, byte swaps, CRC-32, xor with a key),
//! composed at run time into one generated loop that touches each word
//! once.
//!
//! This is the ASH data path of Engler's VCODE paper (PLDI 1996, §4.3 and
//! Table 4): each layer contributes a step, the list is known only at run
//! time, and vcode generates one specialized copying loop for it, so that
//! modular protocol code does not pay for touching memory once per layer.
//!
//! # Entry points
//!
//! * [`Pipeline::new`] validates a [`Step`] list and returns its compiled
//!   loop, cached process-wide by the list of [`StepKind`]s.
//! * [`Pipeline::run`] (and [`scan`](Pipeline::scan) without a copy) runs it
//!   over a buffer, continuing a stream [`State`], and returns [`Outputs`].
//! * [`reference`](mod@reference) has a plain Rust function for each step alone and
//!   [`reference::run`], their composition: the meaning of a pipeline.
//! * [`handfused`] has loops fused by hand in Rust, the baselines of the
//!   benchmarks, and [`table4`] the paper's Table 4 experiment that
//!   `benches/table4.rs`, `fastpath bench ilp` and `fastpath ilp demo` run.
//!
//! ```
//! use ilp::{Pipeline, State, Step, reference};
//! // Decrypt with a repeating key, check the CRC of the plaintext, swap
//! // 16-bit fields to host order while copying; the message arrives in
//! // two pieces.
//! let steps = [Step::Xor(b"key".to_vec()), Step::Crc32, Step::Bswap16, Step::Copy];
//! let p = Pipeline::new(&steps)?;
//! let msg: Vec<u8> = (0..100u8).collect();
//! let (mut st, mut out) = (State::new(), vec![0u8; 100]);
//! p.run(&msg[..40], &mut out[..40], &mut st)?;
//! let got = p.run(&msg[40..], &mut out[40..], &mut st)?;
//! // The same as the steps applied one after another to the whole message
//! // (40 is even, so the 16-bit swaps fall on the same units).
//! let (mut want_st, mut want) = (State::new(), vec![0u8; 100]);
//! let want_out = reference::run(&steps, &msg, &mut want, &mut want_st)?;
//! assert_eq!((got, st, out), (want_out, want_st, want));
//! # Ok::<(), ilp::Error>(())
//! ```
//!
//! # Semantics
//!
//! A pipeline reads `src` as a stream starting at byte offset
//! `state.offset`. The steps apply in list order to the data, as if each
//! were a separate pass:
//!
//! * **Transforms** change the data that later steps see.
//!   [`Step::Bswap16`] swaps the two bytes of every whole 16-bit unit
//!   counted from the start of *this buffer*, and a trailing odd byte is left
//!   as is; [`Step::Bswap32`] reverses every whole 32-bit unit, and a
//!   trailing 1 to 3 bytes are left as is. [`Step::Xor`]`(key)` XORs stream
//!   byte `o` with `key[o % key.len()]`, so the key's phase continues across
//!   buffers of one stream (keys of 1 to [`MAX_KEY`] bytes).
//! * **Observers** see the data as the steps before them left it.
//!   [`Step::Checksum`] adds the data to the running RFC 1071 sum (the
//!   stream's big-endian 16-bit words; a buffer at an odd stream offset
//!   continues the half-filled word, and an odd total length pads with a
//!   zero byte), and the run reports the checksum `!sum` of the stream so
//!   far. [`Step::Crc32`] continues the CRC-32 of IEEE 802.3 (reflected
//!   polynomial `0xEDB88320`, initial and final inversion) over the stream.
//! * **[`Step::Copy`]** writes the data after *all* transforms to `dst`,
//!   wherever it stands in the list. `dst` must then be exactly as long as
//!   `src`; a pipeline without a copy only observes, and its `dst` must be
//!   empty.
//!
//! Copy, Checksum, Crc32 and Xor may each appear once; the byte swaps any
//! number of times. An empty list, more than [`MAX_STEPS`] steps, a repeated
//! step or a bad key length is an [`Error`], and so is a buffer of the wrong
//! length; nothing is read or written then.
//!
//! # The generated loop
//!
//! See `src/codegen.rs` and `docs/ilp.md`: eight unrolled 64-bit words
//! per iteration in groups held in registers, the
//! steps applied to the registers in list order, one load and one store
//! per word, then whole words, then the last 1 to 7 bytes as a zero-padded
//! word. It uses vcode's extension instructions `add1c4` (an
//! add-with-carry chain over four words), `add1c`, `bswap32x2`,
//! `bswap16x4`, `crc32x8` (a slicing-by-8 step: eight table lookups with a
//! scaled-index load) and `ldtab32`. With a copy, a second blocks loop
//! stores with `stnt` (non-temporal) and prefetches the source; it runs
//! from [`NT_MIN_LEN`] bytes on, or as [`Pipeline::run_with`] asks
//! ([`Stores`]). A CRC of the unchanged source (`[Copy, Crc32]`,
//! `[Crc32, Copy]`, `[Crc32]`) folds 64 bytes per iteration by carry-less
//! multiplication in xmm registers (`ldx`, `stx`, `xorq`, `clfold`) when
//! the CPU has PCLMULQDQ, the table path otherwise. On a CPU with AVX-512
//! (F and BW; VPCLMULQDQ for the CRC), buffers of 256 bytes or more first
//! go 256 bytes per iteration through zmm registers (vcode's `Wide`
//! extensions): the CRC lists fold there, and lists of copies, checksums
//! and byte swaps add the checksum in 64-bit vector lanes and swap with
//! `vpshufb`. The features are checked once, when a pipeline is generated.
//!
//! # Dependencies
//!
//! * `vcode`: the code generator the loops are written for.
//! * `thiserror`: the typed [`Error`].
//! * `crc32fast`: the CRC-32 of the separate-passes baseline in [`table4`]
//!   (the well-kept fast implementation, PCLMULQDQ folding), and an
//!   independent CRC in the tests.
//! * (tests and benches) `proptest` for the differential tests, `rand` for
//!   data, `criterion` for the benchmark.

mod codegen;
mod error;
pub mod handfused;
mod pipeline;
pub mod reference;
mod state;
mod step;
pub mod table4;
pub mod tables;

pub use error::Error;
pub use pipeline::{MAX_LEN, NT_MIN_LEN, Pipeline, Stores, Vectors};
pub use state::{Outputs, State, fold64};
pub use step::{MAX_KEY, MAX_STEPS, Step, StepKind};
