//! The paper's filter programs (Table 1, §6.1) and the running example
//! (Figure 2 with the Figure 5 specification), with plain Rust references.
//!
//! A filter program is a chain of processes: `ReadFromArray` reads a stream
//! from the host, each filter transforms it, `WriteToArray` hands the result
//! back. Between processes a byte travels as the message `(1, byte)` and the
//! end of a stream as `(0, 0)`, the paper's "special value": each filter then
//! runs its end-of-stream stage, passes the marker on and resets its state,
//! so a loaded program processes stream after stream. The host side:
//!
//! * `channel arrayIn(int) external in`: a stream is its length `n`, then
//!   `n` bytes, one message each;
//! * `channel arrayOut(int) external out`: each output byte;
//! * `channel arrayEnd(int) external out`: once a stream has ended, the
//!   number of bytes written to `arrayOut` for it.
//!
//! The filters, defined exactly (the paper does not give them; `docs/esp.md`
//! repeats these definitions):
//!
//! * `Evener`: passes bytes through; at the end, if an odd number passed,
//!   one `0x00` byte, so that the stream has even length.
//! * `2ByteSwap`: swaps each pair of bytes (`b0 b1` becomes `b1 b0`); at the
//!   end, a leftover odd byte passes unchanged.
//! * `CRC32`: passes bytes through and computes their CRC-32 (IEEE 802.3:
//!   reflected, polynomial `0xEDB88320`, initial value and final xor
//!   `0xFFFFFFFF`); at the end, the four CRC bytes, least significant first.
//! * `RLE`: each maximal run of one byte value, split into runs of at most
//!   255, becomes the two bytes `(count, byte)`.
//! * `RLD`: the inverse: each pair `(count, byte)` becomes `count` copies of
//!   `byte`; a trailing odd byte is dropped.
//! * `PES`: byte stuffing as in PPP (RFC 1662 §4.2): `0x7E` and `0x7D` become
//!   `0x7D` followed by the byte xor `0x20`.
//!
//! Each program comes with a fast-path specification (`programN.fp`) naming
//! the per-byte steady state of the whole chain: every process starts at the
//! top of its loop and repeats it, and the path exits where a process reaches
//! its end-of-stream stage, which the process-based code runs (§6.1: "the
//! fast path captures the first stage and leaves the second stage in the
//! slow path").
//!
//! ```
//! use esp::filters::{self, PROGRAMS};
//! assert_eq!(PROGRAMS[0].name, "program1");
//! // Program 1: Evener, 2ByteSwap, CRC32.
//! let out = filters::reference(0, b"abc");
//! assert_eq!(&out[..4], b"ba\0c");
//! assert_eq!(out.len(), 8);
//! ```

use crate::runtime::Machine;
use crate::{Error, Result};

/// One of the paper's filter programs: its ESP source and its fast-path
/// specification.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct FilterProgram {
    /// `program1` .. `program4`.
    pub name: &'static str,
    /// The processes in stream order, by the paper's filter names
    /// (`ReadFromArray`, `Evener`, `2ByteSwap`, ..., `WriteToArray`).
    pub chain: &'static [&'static str],
    /// The ESP source (`crates/esp/programs/programN.esp`).
    pub source: &'static str,
    /// The fast-path specification (`crates/esp/programs/programN.fp`).
    pub spec: &'static str,
}

/// The four programs of Table 1, in order: `PROGRAMS[0]` is Program 1.
pub const PROGRAMS: [FilterProgram; 4] = [
    FilterProgram {
        name: "program1",
        chain: &[
            "ReadFromArray",
            "Evener",
            "2ByteSwap",
            "CRC32",
            "WriteToArray",
        ],
        source: include_str!("../programs/program1.esp"),
        spec: include_str!("../programs/program1.fp"),
    },
    FilterProgram {
        name: "program2",
        chain: &["ReadFromArray", "RLE", "2ByteSwap", "PES", "WriteToArray"],
        source: include_str!("../programs/program2.esp"),
        spec: include_str!("../programs/program2.fp"),
    },
    FilterProgram {
        name: "program3",
        chain: &[
            "ReadFromArray",
            "RLE",
            "2ByteSwap",
            "PES",
            "PES",
            "2ByteSwap",
            "RLD",
            "WriteToArray",
        ],
        source: include_str!("../programs/program3.esp"),
        spec: include_str!("../programs/program3.fp"),
    },
    FilterProgram {
        name: "program4",
        chain: &[
            "ReadFromArray",
            "CRC32",
            "2ByteSwap",
            "PES",
            "PES",
            "2ByteSwap",
            "RLD",
            "WriteToArray",
        ],
        source: include_str!("../programs/program4.esp"),
        spec: include_str!("../programs/program4.fp"),
    },
];

/// Figure 2, the paper's running example, line for line, with its host
/// functions declared (`translationUnavailable`, `translate`,
/// `preparePacket`) and its omitted code left empty
/// (`crates/esp/programs/figure2.esp`).
pub const FIGURE2: &str = include_str!("../programs/figure2.esp");

/// Figure 5: the fast path of Figure 2 (`crates/esp/programs/figure5.fp`).
pub const FIGURE5: &str = include_str!("../programs/figure5.fp");

/// Runs one stream through a loaded filter program: queues its length and
/// its bytes on `arrayIn`, runs the machine until it is idle, and returns
/// the bytes `WriteToArray` sent on `arrayOut`, after checking that the
/// stream ended: exactly one count arrived on `arrayEnd`, equal to the
/// number of bytes, and every value was a byte.
///
/// Errors: the machine's own (a binding error if the program has no
/// `arrayIn`, `arrayOut` or `arrayEnd`), or [`Error::Host`] naming the
/// channel whose output breaks the filter protocol.
pub fn run(machine: &mut Machine, input: &[u8]) -> Result<Vec<u8>> {
    let mut msgs = Vec::with_capacity(input.len() + 1);
    msgs.push(input.len() as i64);
    msgs.extend(input.iter().map(|&b| i64::from(b)));
    // Check all three channels before running, so that a program that is
    // not a filter program is not run on the input.
    machine.take_output("arrayOut")?;
    machine.take_output("arrayEnd")?;
    machine.push("arrayIn", &msgs)?;
    machine.run()?;
    let out = machine.take_output("arrayOut")?;
    let end = machine.take_output("arrayEnd")?;
    let protocol = |msg: String| Error::Host {
        name: "WriteToArray".into(),
        msg,
    };
    match end[..] {
        [count] if count == out.len() as i64 => {}
        [count] => {
            return Err(protocol(format!(
                "arrayEnd says {count} bytes, arrayOut carried {}",
                out.len()
            )));
        }
        _ => {
            return Err(protocol(format!(
                "expected one end-of-stream count on arrayEnd, got {} values",
                end.len()
            )));
        }
    }
    out.iter()
        .map(|&v| {
            u8::try_from(v).map_err(|_| protocol(format!("arrayOut carried {v}, not a byte")))
        })
        .collect()
}

/// The plain Rust reference of program `program` (an index into
/// [`PROGRAMS`]) on one stream: the bytes `WriteToArray` stores.
///
/// # Panics
///
/// If `program` is not an index into [`PROGRAMS`].
pub fn reference(program: usize, input: &[u8]) -> Vec<u8> {
    assert!(
        program < PROGRAMS.len(),
        "filters::reference: program index {program} out of range 0..{}",
        PROGRAMS.len()
    );
    chain(PROGRAMS[program].chain, input)
        .expect("every filter of PROGRAMS has a reference (tested)")
}

/// Runs one stream through a chain of filters by name (as in
/// [`FilterProgram::chain`]; `ReadFromArray` and `WriteToArray` pass the
/// stream through). `None` if a name is not a filter.
pub fn chain(filters: &[&str], input: &[u8]) -> Option<Vec<u8>> {
    let mut data = input.to_vec();
    for f in filters {
        data = filter(f, &data)?;
    }
    Some(data)
}

/// One filter by name, on one whole stream: the bytes it sends before the
/// end marker. `None` if `name` is not a filter.
pub fn filter(name: &str, input: &[u8]) -> Option<Vec<u8>> {
    Some(match name {
        "ReadFromArray" | "WriteToArray" => input.to_vec(),
        "Evener" => evener(input),
        "2ByteSwap" => two_byte_swap(input),
        "CRC32" => crc32(input),
        "RLE" => rle(input),
        "RLD" => rld(input),
        "PES" => pes(input),
        _ => return None,
    })
}

/// `Evener`: the stream, and one `0x00` if its length is odd.
pub fn evener(input: &[u8]) -> Vec<u8> {
    let mut out = input.to_vec();
    if out.len() % 2 == 1 {
        out.push(0);
    }
    out
}

/// `2ByteSwap`: each pair swapped; a leftover odd byte unchanged.
pub fn two_byte_swap(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    let mut pairs = input.chunks_exact(2);
    for pair in &mut pairs {
        out.extend_from_slice(&[pair[1], pair[0]]);
    }
    out.extend_from_slice(pairs.remainder());
    out
}

/// The CRC-32 of IEEE 802.3 (reflected, polynomial `0xEDB88320`, initial
/// value and final xor `0xFFFFFFFF`), as the `cksum -a crc32b` / zlib
/// `crc32` of `data`.
pub fn crc32_value(data: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// `CRC32`: the stream, then its CRC-32 least significant byte first.
pub fn crc32(input: &[u8]) -> Vec<u8> {
    let mut out = input.to_vec();
    out.extend_from_slice(&crc32_value(input).to_le_bytes());
    out
}

/// `RLE`: each maximal run, split into runs of at most 255, as
/// `(count, byte)`.
pub fn rle(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < input.len() {
        let b = input[i];
        let run = input[i..].iter().take(255).take_while(|&&x| x == b).count();
        out.extend_from_slice(&[run as u8, b]);
        i += run;
    }
    out
}

/// `RLD`: each pair `(count, byte)` as `count` copies of `byte`; a trailing
/// odd byte is dropped.
pub fn rld(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for pair in input.chunks_exact(2) {
        out.extend(std::iter::repeat_n(pair[1], usize::from(pair[0])));
    }
    out
}

/// `PES`: `0x7E` and `0x7D` become `0x7D, byte ^ 0x20`.
pub fn pes(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    for &b in input {
        if b == 0x7E || b == 0x7D {
            out.extend_from_slice(&[0x7D, b ^ 0x20]);
        } else {
            out.push(b);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_check_value() {
        // The standard check value of CRC-32/ISO-HDLC.
        assert_eq!(crc32_value(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32_value(b""), 0);
        assert_eq!(crc32(b"")[..], [0, 0, 0, 0]);
        assert_eq!(crc32(b"a")[..], [b'a', 0x43, 0xBE, 0xB7, 0xE8]);
    }

    #[test]
    fn filters_by_definition() {
        assert_eq!(evener(b"abc"), b"abc\0");
        assert_eq!(evener(b"ab"), b"ab");
        assert_eq!(two_byte_swap(b"abcde"), b"badce");
        assert_eq!(
            pes(&[1, 0x7E, 0x7D, 0x5E]),
            [1, 0x7D, 0x5E, 0x7D, 0x5D, 0x5E]
        );
        assert_eq!(rle(b"aaab"), [3, b'a', 1, b'b']);
        let long = vec![7u8; 600];
        assert_eq!(rle(&long), [255, 7, 255, 7, 90, 7]);
        assert_eq!(rld(&[3, b'a', 0, b'z', 1, b'b', 9]), b"aaab");
        assert_eq!(rld(&rle(&long)), long);
    }

    #[test]
    fn chains() {
        for (i, p) in PROGRAMS.iter().enumerate() {
            assert!(chain(p.chain, b"x").is_some(), "{}", p.name);
            assert_eq!(reference(i, b""), chain(p.chain, b"").unwrap());
        }
        assert_eq!(chain(&["Evener", "nope"], b"x"), None);
        // Program 3 is the identity on a stream whose bytes and run lengths
        // are never 0x7E or 0x7D: encode, swap, stuff nothing twice, swap
        // back, decode.
        assert_eq!(reference(2, b"aa"), b"aa");
    }
}
