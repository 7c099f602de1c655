//! The crate's error type.

use crate::step::StepKind;

/// What went wrong building or running a pipeline.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The step list is empty.
    #[error("ilp: a pipeline needs at least one step")]
    Empty,
    /// The step list is longer than [`MAX_STEPS`](crate::MAX_STEPS).
    #[error("ilp: {len} steps; at most {max} are allowed")]
    TooManySteps {
        /// Steps given.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A step that may appear only once appears again (copy, checksum,
    /// CRC-32 and xor each have one output or one key).
    #[error("ilp: step {index} repeats {kind:?}, which may appear only once")]
    Duplicate {
        /// Position of the second occurrence in the list.
        index: usize,
        /// The repeated step.
        kind: StepKind,
    },
    /// An xor key of a length outside `1..=MAX_KEY`.
    #[error("ilp: xor key of {len} bytes at step {index}; it must have 1 to {max}")]
    KeyLength {
        /// Position of the step.
        index: usize,
        /// Key length given.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// `dst` is not as long as `src` in a pipeline that copies.
    #[error(
        "ilp: source is {src} bytes but destination is {dst}; a copying pipeline needs equal lengths"
    )]
    LengthMismatch {
        /// `src.len()`.
        src: usize,
        /// `dst.len()`.
        dst: usize,
    },
    /// A pipeline without [`Step::Copy`](crate::Step::Copy) was given a
    /// non-empty destination, which it would not write.
    #[error(
        "ilp: the pipeline has no copy step, so the destination must be empty (it is {dst} bytes)"
    )]
    UnexpectedDestination {
        /// `dst.len()`.
        dst: usize,
    },
    /// A buffer longer than [`MAX_LEN`](crate::MAX_LEN).
    #[error("ilp: buffer of {len} bytes; at most {max} are supported")]
    TooLong {
        /// The length given.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The loop needs more registers than there are (only when generating
    /// for vcode's reference backend, which leaves registers free for the
    /// portable definitions of the extension instructions).
    #[error("ilp: the loop for this step list does not fit the registers")]
    OutOfRegisters,
    /// vcode refused the generated code (a bug in this crate if it
    /// happens).
    #[error("ilp: code generation failed: {0}")]
    Codegen(#[from] vcode::Error),
}
