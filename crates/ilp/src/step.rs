//! The steps a pipeline composes, and the checks on a step list.

use crate::error::Error;

/// Longest step list a pipeline accepts.
pub const MAX_STEPS: usize = 16;
/// Longest xor key, in bytes.
pub const MAX_KEY: usize = 256;

/// One data-touching step of a protocol layer.
///
/// Transforms ([`Bswap16`](Step::Bswap16), [`Bswap32`](Step::Bswap32),
/// [`Xor`](Step::Xor)) change the data for the steps after them;
/// observers ([`Checksum`](Step::Checksum), [`Crc32`](Step::Crc32)) see the
/// data as the steps before them left it; [`Copy`](Step::Copy) makes the
/// pipeline write the final data to `dst` wherever it stands in the list.
/// See the [crate docs](crate) for the exact semantics.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// Write the transformed data to `dst` (at most once per list).
    Copy,
    /// The Internet checksum (RFC 1071) of the data at this point (at most once).
    Checksum,
    /// Swap the two bytes of each whole 16-bit unit from the buffer start;
    /// a trailing odd byte is left as is.
    Bswap16,
    /// Reverse the four bytes of each whole 32-bit unit from the buffer
    /// start; a trailing 1 to 3 bytes are left as is.
    Bswap32,
    /// CRC-32 (IEEE 802.3, the one of Ethernet, zlib and PNG) of the data
    /// at this point (at most once).
    Crc32,
    /// XOR with a key of 1 to [`MAX_KEY`] bytes repeating from stream
    /// offset 0 (at most once).
    Xor(Vec<u8>),
}

/// A step without its data: what the generated code depends on (the xor
/// key's length, not its bytes). Pipelines are cached by a list of these.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum StepKind {
    /// [`Step::Copy`].
    Copy,
    /// [`Step::Checksum`].
    Checksum,
    /// [`Step::Bswap16`].
    Bswap16,
    /// [`Step::Bswap32`].
    Bswap32,
    /// [`Step::Crc32`].
    Crc32,
    /// [`Step::Xor`] with a key of this many bytes.
    Xor(u32),
}

impl Step {
    /// The step's kind.
    pub fn kind(&self) -> StepKind {
        match self {
            Step::Copy => StepKind::Copy,
            Step::Checksum => StepKind::Checksum,
            Step::Bswap16 => StepKind::Bswap16,
            Step::Bswap32 => StepKind::Bswap32,
            Step::Crc32 => StepKind::Crc32,
            Step::Xor(k) => StepKind::Xor(k.len() as u32),
        }
    }
}

impl StepKind {
    /// True for the kinds that may appear once (all but the byte swaps).
    fn unique(self) -> bool {
        !matches!(self, StepKind::Bswap16 | StepKind::Bswap32)
    }

    /// The same kind for comparing duplicates (xor keys of any length).
    fn class(self) -> StepKind {
        match self {
            StepKind::Xor(_) => StepKind::Xor(0),
            k => k,
        }
    }
}

/// Checks a step list: not empty, not too long, keys of legal length,
/// copy/checksum/CRC/xor at most once.
pub fn validate(steps: &[Step]) -> Result<(), Error> {
    if steps.is_empty() {
        return Err(Error::Empty);
    }
    if steps.len() > MAX_STEPS {
        return Err(Error::TooManySteps {
            len: steps.len(),
            max: MAX_STEPS,
        });
    }
    for (i, s) in steps.iter().enumerate() {
        if let Step::Xor(k) = s
            && (k.is_empty() || k.len() > MAX_KEY)
        {
            return Err(Error::KeyLength {
                index: i,
                len: k.len(),
                max: MAX_KEY,
            });
        }
        let kind = s.kind();
        if kind.unique() && steps[..i].iter().any(|p| p.kind().class() == kind.class()) {
            return Err(Error::Duplicate { index: i, kind });
        }
    }
    Ok(())
}
