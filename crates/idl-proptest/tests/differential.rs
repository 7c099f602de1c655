//! The three servers of one interface answer the same requests alike, and
//! the Rust and C clients refuse the same calls before sending:
//! the generated Rust server (the build's harness), the dynamic server
//! (`idl::dynamic`, loaded from the same IDL text at run time) and the
//! generated C server (`idl::gen_c`, compiled with gcc into a shared
//! library and served in this process).
//!
//! For each random interface of the build, the same requests go to all
//! three, each over its own shared-memory channel. The requests are drawn
//! from the operation's plan ([`idl::model::plan`]): every in and inout
//! value is valid most of the time, and now and then hostile where the
//! wire allows it: a `boolean` byte other than 0 or 1, a string that is
//! not UTF-8, a descriptor outside the string area, a sequence of one more
//! element than its `size_is` length's type counts. The first failing
//! check names the status, so the three must answer the same status for
//! every request.
//!
//! A request that passes every check reaches the implementation, and all
//! three implementations answer by one rule, [`idl_proptest::Answers`]
//! (seeded by the request's number, reading the inout values it changes):
//! the Rust server is each harness's `Filler`, the dynamic server's
//! handler and the C server's functions are one Rust function each that
//! reads its arguments by the conventions of docs/idl.md ("The handler
//! conventions", "Generated C"). So the replies must also agree value by
//! value: every inout and out value and the return value, read from the
//! reply record and the string area, compared field by field.
//!
//! The clients refuse alike too: for each random interface, random calls
//! go through the generated C client stub (driven by a C harness the test
//! generates, `idlh_call`, compiled into the same library), the generated
//! Rust client stub with the same values (the build's harness,
//! `refusal`: the C stub gets the Rust values' addresses, and copies of
//! what it may change) and the dynamic client (`DynClient::call`, the same
//! values as `idl::dynamic::Value`s), each over its own channel to a Rust
//! server that counts what it receives, on a channel with small limits (1,536 bytes
//! per string, 3 strings per message, a 4 KiB string area). Strings and
//! sequences are drawn around the per-string limit and, for a `size_is`
//! length's type that counts fewer elements, around that count; the C
//! client's in strings are now and then not UTF-8 (its API carries them;
//! the Rust one's cannot). Each call must be sent, or refused before
//! sending, as the operation's plan says (its client checks, then the
//! transport's limits in record order), by all three clients, with the
//! matching error (`CallError::CountTooLarge`, `StringTooLong`,
//! `TooManyStrings`, `AreaFull`; C's `IDL_E_LIMIT`). A `size_is` sequence
//! longer than its length's type counts cannot be passed to the C stub
//! (the count is that type); those calls go to the other two only.
//! Booleans out of range reach neither typed client (`bool` in both).
//!
//! Environment: `IDL_PROPTEST_RUN_SEED` (the requests),
//! `IDL_DIFF_REQUESTS` (per interface, 150 by default),
//! `IDL_REFUSAL_CALLS` (per interface, 60 by default), `IDL_PROPTEST_ONLY`
//! (one interface by name). Without gcc the C server and client are left out, unless
//! `IDL_REQUIRE_GCC=1`. The dynamic server covers every interface whose
//! handlers a call can reach (`idl::dynamic::GenError::TooManyArgs`
//! otherwise: past 31 arguments, which no random interface has); the test
//! prints how many.

use idl::model::plan::{OpPlan, Repr, plan};
use idl::model::{Dir, Prim, StructDef, Type};
use idl::rt::shm::{self, ClientEnd};
use idl::rt::{CallError, ClientTransport, Status};
use idl_proptest::{Answers, CASES, CURRENT_REQUEST, Case, Rng, Value, channel_config, difference};
use std::ffi::{CString, c_int, c_void};
use std::os::fd::IntoRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering;

const DEFAULT_RUN_SEED: u64 = 0xd1ff_5eed;
const DEFAULT_REQUESTS: usize = 150;
const DEFAULT_REFUSAL_CALLS: usize = 60;

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    let v = v.trim().replace('_', "");
    let n = match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => v.parse(),
    };
    Some(n.unwrap_or_else(|e| panic!("{name}={v} is not a number: {e}")))
}

/// What a server answered: the reply's values (inout, out and return, in
/// declaration order, each with its name), or the status that refused it.
type Answer = Result<Vec<(String, Value)>, Status>;

/// The status of an answer, for reports and the tally.
fn status(a: &Answer) -> Status {
    match a {
        Ok(_) => Status::Ok,
        Err(s) => *s,
    }
}

/// Where `a` and `b` differ, if they do: the status, or the first value.
fn disagreement(a: &Answer, b: &Answer) -> Option<String> {
    match (a, b) {
        (Ok(x), Ok(y)) => x
            .iter()
            .zip(y)
            .find_map(|((name, u), (_, v))| difference("", u, v).map(|d| format!("`{name}`{d}"))),
        _ if status(a) != status(b) => Some(format!("{} vs {}", status(a), status(b))),
        _ => None,
    }
}

/// Size and alignment of a value of `ty` in the record (C's rules).
fn size_align(structs: &[StructDef], ty: &Type) -> (usize, usize) {
    match ty {
        Type::Prim(p) => (p.size() as usize, p.size() as usize),
        Type::Struct(id) => (structs[*id].size as usize, structs[*id].align as usize),
        Type::Array(e, n) => {
            let (size, align) = size_align(structs, e);
            (size * *n as usize, align)
        }
        Type::String | Type::Sequence(_) => (8, 4),
    }
}

/// Each field of struct `id` with its offset.
fn fields(structs: &[StructDef], id: usize) -> Vec<(usize, &Type)> {
    let mut off = 0usize;
    structs[id]
        .fields
        .iter()
        .map(|(_, ty)| {
            let (size, align) = size_align(structs, ty);
            off = off.next_multiple_of(align);
            let at = off;
            off += size;
            (at, ty)
        })
        .collect()
}

/// The value of type `ty` (not a string or sequence) in `b`.
fn decode(structs: &[StructDef], ty: &Type, b: &[u8]) -> Value {
    match ty {
        Type::Prim(Prim::Bool) => match b[0] {
            0 => Value::Bool(false),
            1 => Value::Bool(true),
            // Not a boolean: shown as the byte it is.
            x => Value::Int(i128::from(x)),
        },
        Type::Prim(p) => {
            let w = p.size() as usize;
            let mut raw = [0u8; 16];
            raw[..w].copy_from_slice(&b[..w]);
            let u = u128::from_le_bytes(raw);
            let shift = 128 - 8 * w as u32;
            Value::Int(if p.signed() {
                ((u << shift) as i128) >> shift
            } else {
                u as i128
            })
        }
        Type::Struct(id) => Value::List(
            fields(structs, *id)
                .into_iter()
                .map(|(at, fty)| decode(structs, fty, &b[at..]))
                .collect(),
        ),
        Type::Array(e, n) => {
            let (size, _) = size_align(structs, e);
            Value::List(
                (0..*n as usize)
                    .map(|i| decode(structs, e, &b[i * size..]))
                    .collect(),
            )
        }
        Type::String | Type::Sequence(_) => unreachable!("a descriptor, decoded by `reply`"),
    }
}

/// The reply's values of `p` on the client end `c`: from the record `rec`
/// and, for strings and sequences, the string area.
fn reply(c: &ClientEnd, p: &OpPlan, structs: &[StructDef], rec: &[u8]) -> Answer {
    let mut out = Vec::new();
    for v in p.values.iter().filter(|v| v.dir != Dir::In) {
        let Some(at) = v.offset() else { continue };
        let at = at as usize;
        let value = match &v.ty {
            Type::String | Type::Sequence(_) => {
                let off = u32::from_ne_bytes(rec[at..at + 4].try_into().expect("4 bytes"));
                let n = u32::from_ne_bytes(rec[at + 4..at + 8].try_into().expect("4 bytes"));
                let esize = match &v.ty {
                    Type::Sequence(e) => size_align(structs, e).0,
                    _ => 1,
                };
                let bytes = match c.reply_bytes(off, n as usize * esize) {
                    Ok(b) => b,
                    Err(_) => return Err(Status::BadString),
                };
                match &v.ty {
                    Type::Sequence(e) => Value::List(
                        (0..n as usize)
                            .map(|i| decode(structs, e, &bytes[i * esize..]))
                            .collect(),
                    ),
                    _ => Value::Str(String::from_utf8_lossy(bytes).into_owned()),
                }
            }
            ty => decode(structs, ty, &rec[at..]),
        };
        out.push((v.name.clone(), value));
    }
    Ok(out)
}

// ---- the answer rule over raw memory (the C and dynamic servers)

/// Writes the answer to a value of type `ty` (not a string or sequence)
/// into `b` by the [`Answers`] rule: an out value from the draws, an inout
/// value (`inout`) xor'ed with them.
fn fill(structs: &[StructDef], ty: &Type, b: &mut [u8], a: &mut Answers, inout: bool) {
    match ty {
        Type::Prim(Prim::Bool) => {
            let d = (a.draw() & 1) as u8;
            b[0] = if inout { b[0] ^ d } else { d };
        }
        Type::Prim(p) => {
            let d = a.draw().to_le_bytes();
            for (x, y) in b[..p.size() as usize].iter_mut().zip(d) {
                *x = if inout { *x ^ y } else { y };
            }
        }
        Type::Struct(id) => {
            for (at, fty) in fields(structs, *id) {
                fill(structs, fty, &mut b[at..], a, inout);
            }
        }
        Type::Array(e, n) => {
            let (size, _) = size_align(structs, e);
            for i in 0..*n as usize {
                fill(structs, e, &mut b[i * size..], a, inout);
            }
        }
        Type::String | Type::Sequence(_) => unreachable!("written by `answer_raw`"),
    }
}

/// Where one value's arguments are, in a handler's or a C function's
/// arguments.
#[derive(Clone, Copy, Default)]
struct Args {
    /// Its elements, or the value (an in scalar, unused).
    ptr: u64,
    /// The count of an in or inout string or sequence, passed by value.
    count: Option<u64>,
    /// Where the count goes (an out string or sequence) or is (an inout
    /// string), and its width in bytes.
    count_ptr: Option<(u64, usize)>,
    /// An out string's or sequence's room, in elements.
    cap: u64,
}

/// Answers one call of `p` whose arguments are `args` (by value index),
/// by the [`Answers`] rule, writing through the pointers; returns the
/// return value's bits when it is a scalar the caller returns.
///
/// # Safety
///
/// Every pointer in `args` is what the server passes for that value: room
/// for the value's bytes, an out string's or sequence's room of at least
/// 3 elements, its count's word of the given width.
unsafe fn answer_raw(
    p: &OpPlan,
    structs: &[StructDef],
    args: &[Args],
    ret_ptr: Option<u64>,
) -> u64 {
    let mut a = Answers::current();
    let mut ret = 0;
    for (i, v) in p.values.iter().enumerate() {
        if v.dir == Dir::In || v.length_of.is_some() {
            continue;
        }
        let is_ret = p.ret() == Some(i);
        let inout = v.dir == Dir::InOut && !is_ret;
        let g = args[i];
        match &v.ty {
            Type::String if inout => {
                let n = g.count.unwrap_or_else(|| {
                    let q = g.count_ptr.expect("an inout string's count");
                    // SAFETY: the count word of the value's room.
                    unsafe { get_count(q) }
                });
                // SAFETY: the room holds the old value's `n` bytes.
                let s = unsafe { std::slice::from_raw_parts_mut(g.ptr as *mut u8, n as usize) };
                for x in s {
                    *x = a.inout_byte(*x);
                }
            }
            Type::String => {
                // What does not fit the room is left out, and the count
                // says more than the room: the stub answers `Overflow`, as
                // the Rust writer does.
                let t = a.out_string();
                let fits = t.len().min(g.cap as usize);
                // SAFETY: the room holds `cap` bytes; the count word is
                // the room's.
                unsafe {
                    std::ptr::copy_nonoverlapping(t.as_ptr(), g.ptr as *mut u8, fits);
                    put_count(g.count_ptr.expect("an out string's count"), t.len() as u64);
                }
            }
            Type::Sequence(e) => {
                let (size, _) = size_align(structs, e);
                let (n, fits) = if inout {
                    let n = g.count.expect("an inout sequence's count") as usize;
                    (n, n)
                } else {
                    let n = a.out_len();
                    (n, n.min(g.cap as usize))
                };
                // The elements past an out room's end are drawn and left
                // out (the stub answers `Overflow`, as the Rust writer does).
                let mut tmp = vec![0u8; n * size];
                if inout {
                    // SAFETY: the inout sequence's own `n` elements.
                    tmp.copy_from_slice(unsafe {
                        std::slice::from_raw_parts(g.ptr as *const u8, n * size)
                    });
                }
                for k in 0..n {
                    fill(structs, e, &mut tmp[k * size..], &mut a, inout);
                }
                // SAFETY: `fits` elements: the inout sequence's own, or at
                // most the out room's capacity.
                unsafe {
                    std::ptr::copy_nonoverlapping(tmp.as_ptr(), g.ptr as *mut u8, fits * size);
                }
                if !inout {
                    // SAFETY: the room's count word.
                    unsafe { put_count(g.count_ptr.expect("an out sequence's count"), n as u64) };
                }
            }
            ty => {
                let (size, _) = size_align(structs, ty);
                match (is_ret, ret_ptr) {
                    (true, None) => {
                        let mut b = [0u8; 8];
                        fill(structs, ty, &mut b, &mut a, false);
                        ret = u64::from_le_bytes(b);
                    }
                    (true, Some(q)) => {
                        // SAFETY: the return value's room.
                        let b = unsafe { std::slice::from_raw_parts_mut(q as *mut u8, size) };
                        fill(structs, ty, b, &mut a, false);
                    }
                    (false, _) => {
                        // SAFETY: the value's field in the record.
                        let b = unsafe { std::slice::from_raw_parts_mut(g.ptr as *mut u8, size) };
                        fill(structs, ty, b, &mut a, inout);
                    }
                }
            }
        }
    }
    ret
}

/// Writes `n` into the count word `(ptr, width)`.
///
/// # Safety
///
/// `ptr` points at a writable, aligned word of `width` bytes.
unsafe fn put_count((ptr, width): (u64, usize), n: u64) {
    // SAFETY: the caller's promise.
    unsafe {
        match width {
            1 => *(ptr as *mut u8) = n as u8,
            2 => *(ptr as *mut u16) = n as u16,
            4 => *(ptr as *mut u32) = n as u32,
            _ => *(ptr as *mut u64) = n,
        }
    }
}

// ---- the dynamic server's handler (docs/idl.md, "The handler conventions")

/// What a dynamic handler needs to read its arguments: the operation.
struct DynOp<'a> {
    plan: &'a OpPlan,
    structs: &'a [StructDef],
}

/// The handler takes as many words as a handler call can pass
/// (`idl::dynamic::MAX_HANDLER_ARGS`, 31 besides the context: the first
/// in registers, the rest on the stack by the C convention) and reads only
/// the ones its operation's plan names; the rest are never looked at.
// The handler below takes exactly this many words after its context.
const _: () = assert!(idl::dynamic::MAX_HANDLER_ARGS == 31);

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn dyn_handler(
    ctx: *mut c_void,
    a0: u64,
    a1: u64,
    a2: u64,
    a3: u64,
    a4: u64,
    a5: u64,
    a6: u64,
    a7: u64,
    a8: u64,
    a9: u64,
    a10: u64,
    a11: u64,
    a12: u64,
    a13: u64,
    a14: u64,
    a15: u64,
    a16: u64,
    a17: u64,
    a18: u64,
    a19: u64,
    a20: u64,
    a21: u64,
    a22: u64,
    a23: u64,
    a24: u64,
    a25: u64,
    a26: u64,
    a27: u64,
    a28: u64,
    a29: u64,
    a30: u64,
) -> u64 {
    // SAFETY: the context registered with this handler is a `DynOp` that
    // outlives the server.
    let op = unsafe { &*(ctx as *const DynOp<'_>) };
    let regs = [
        a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19,
        a20, a21, a22, a23, a24, a25, a26, a27, a28, a29, a30,
    ];
    let mut k = 0;
    let mut next = || {
        let r = regs[k];
        k += 1;
        r
    };
    let p = op.plan;
    let mut args = vec![Args::default(); p.values.len()];
    for (i, v) in p.values.iter().enumerate() {
        if v.length_of.is_some() || p.ret() == Some(i) {
            continue;
        }
        args[i] = match (v.dir, v.repr) {
            (Dir::Out, Repr::Str | Repr::Seq { .. }) => {
                let (ptr, len) = (next(), next());
                Args {
                    ptr,
                    count: None,
                    count_ptr: Some((len, 4)),
                    // SAFETY: the room's count word holds its capacity on
                    // entry.
                    cap: unsafe { get_count((len, 4)) },
                }
            }
            (_, Repr::Str | Repr::Seq { .. }) => Args {
                ptr: next(),
                count: Some(next()),
                ..Args::default()
            },
            _ => Args {
                ptr: next(),
                ..Args::default()
            },
        };
    }
    let ret_ptr = p
        .ret()
        .filter(|&r| matches!(p.values[r].repr, Repr::Agg { .. }))
        .map(|_| next());
    // SAFETY: the dynamic server passes these pointers (docs/idl.md).
    unsafe { answer_raw(p, op.structs, &args, ret_ptr) }
}

// ---- the C server's functions (docs/idl.md, "Generated C")

/// What a C server function needs to read its arguments: the operations.
struct COps<'a> {
    plans: &'a [OpPlan],
    structs: &'a [StructDef],
}

/// The C arguments of operation `p`'s server function after `self`, as
/// value indices (`usize::MAX`: the return value's pointer) and roles.
#[derive(Clone, Copy)]
enum CArg {
    /// Unused (an in value).
    Skip,
    /// The value's pointer.
    Ptr(usize),
    /// The value's count, by value, of this width.
    Count(usize, usize),
    /// The pointer to the value's count, of this width.
    CountPtr(usize, usize),
    /// A room's capacity, of the value.
    Cap(usize),
    /// The return value's pointer.
    Ret,
}

fn c_args(p: &OpPlan) -> Vec<CArg> {
    let mut out = Vec::new();
    for (i, v) in p.values.iter().enumerate() {
        if p.ret() == Some(i) {
            out.push(CArg::Ret);
            continue;
        }
        if let Some(seq) = v.length_of {
            let width = match v.ty {
                Type::Prim(p) => p.size() as usize,
                _ => unreachable!("a length is an integer"),
            };
            out.push(match v.dir {
                Dir::In => CArg::Count(seq, width),
                _ => CArg::CountPtr(seq, width),
            });
            continue;
        }
        match (v.dir, v.repr) {
            (Dir::In, Repr::Str) => out.extend([CArg::Skip, CArg::Skip]),
            (Dir::In, Repr::Seq { .. }) if v.size_is.is_none() => {
                out.extend([CArg::Skip, CArg::Skip]);
            }
            (Dir::In, _) => out.push(CArg::Skip),
            (_, Repr::Str) => out.extend([CArg::Ptr(i), CArg::CountPtr(i, 4), CArg::Cap(i)]),
            (Dir::InOut, Repr::Seq { .. }) if v.size_is.is_none() => {
                out.extend([CArg::Ptr(i), CArg::Count(i, 4)]);
            }
            (Dir::InOut, Repr::Seq { .. }) => out.push(CArg::Ptr(i)),
            (_, Repr::Seq { .. }) if v.size_is.is_none() => {
                out.extend([CArg::Ptr(i), CArg::CountPtr(i, 4), CArg::Cap(i)]);
            }
            (_, Repr::Seq { .. }) => out.extend([CArg::Ptr(i), CArg::Cap(i)]),
            _ => out.push(CArg::Ptr(i)),
        }
    }
    out
}

/// The most arguments a C server function of a random interface takes
/// after `self` (8 parameters of 3 arguments, their lengths, the return).
const C_MAX_ARGS: usize = 30;

/// Operation `K`'s C server function: reads the arguments the C stub
/// passes (the operation's [`c_args`]) and answers by the rule.
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn c_function<const K: usize>(
    this: *mut c_void,
    a0: u64,
    a1: u64,
    a2: u64,
    a3: u64,
    a4: u64,
    a5: u64,
    a6: u64,
    a7: u64,
    a8: u64,
    a9: u64,
    a10: u64,
    a11: u64,
    a12: u64,
    a13: u64,
    a14: u64,
    a15: u64,
    a16: u64,
    a17: u64,
    a18: u64,
    a19: u64,
    a20: u64,
    a21: u64,
    a22: u64,
    a23: u64,
    a24: u64,
    a25: u64,
    a26: u64,
    a27: u64,
    a28: u64,
    a29: u64,
) -> c_int {
    let regs: [u64; C_MAX_ARGS] = [
        a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19,
        a20, a21, a22, a23, a24, a25, a26, a27, a28, a29,
    ];
    // SAFETY: `self` of the C server is the `COps` the test passed, which
    // outlives the server.
    let ops = unsafe { &*(this as *const COps<'_>) };
    let p = &ops.plans[K];
    let mut args = vec![Args::default(); p.values.len()];
    let mut ret_ptr = None;
    for (arg, &r) in c_args(p).iter().zip(&regs) {
        match *arg {
            CArg::Skip => {}
            CArg::Cap(i) => args[i].cap = r & 0xffff_ffff,
            CArg::Ptr(i) => args[i].ptr = r,
            // Above its type's width, an argument's bits are the caller's.
            CArg::Count(i, w) => args[i].count = Some(r & (u64::MAX >> (64 - 8 * w))),
            CArg::CountPtr(i, w) => {
                args[i].count_ptr = Some((r, w));
                if p.values[i].dir == Dir::InOut {
                    // SAFETY: an inout length's word, of width `w`.
                    args[i].count = Some(unsafe { get_count((r, w)) });
                }
            }
            CArg::Ret => ret_ptr = Some(r),
        }
    }
    // SAFETY: the C stub passes these pointers (docs/idl.md).
    unsafe { answer_raw(p, ops.structs, &args, ret_ptr) };
    0
}

/// Reads the count word `(ptr, width)`.
///
/// # Safety
///
/// `ptr` points at a readable, aligned word of `width` bytes.
unsafe fn get_count((ptr, width): (u64, usize)) -> u64 {
    // SAFETY: the caller's promise.
    unsafe {
        match width {
            1 => u64::from(*(ptr as *const u8)),
            2 => u64::from(*(ptr as *const u16)),
            4 => u64::from(*(ptr as *const u32)),
            _ => *(ptr as *const u64),
        }
    }
}

/// The C server functions of operations 0 to 7 (a random interface has
/// at most 8).
fn c_functions() -> [usize; 8] {
    [
        c_function::<0> as *const () as usize,
        c_function::<1> as *const () as usize,
        c_function::<2> as *const () as usize,
        c_function::<3> as *const () as usize,
        c_function::<4> as *const () as usize,
        c_function::<5> as *const () as usize,
        c_function::<6> as *const () as usize,
        c_function::<7> as *const () as usize,
    ]
}

/// One request: its key, its record, and what goes into the string area
/// first (each part at its alignment).
struct Request {
    key: u16,
    record: Vec<u8>,
    area: Vec<(Vec<u8>, usize)>,
    /// Which descriptors point at which area part (record offset, part),
    /// or at `off` outside the area (`Err(off)`), with the element count.
    descs: Vec<(usize, Result<usize, u32>, u32)>,
    /// What it tries, for reports.
    what: String,
}

/// A request of operation `key` (planned by `p`) from `rng`.
fn request(rng: &mut Rng, key: u16, p: &OpPlan, request_size: usize, area: u32) -> Request {
    let mut record: Vec<u8> = (0..request_size).map(|_| rng.next_u64() as u8).collect();
    let mut parts = Vec::new();
    let mut descs = Vec::new();
    let mut what = Vec::new();
    for &i in &p.request {
        let v = &p.values[i];
        let Some(at) = v.offset() else { continue };
        let at = at as usize;
        match v.repr {
            Repr::Bool => {
                record[at] = if rng.below(10) == 0 {
                    what.push(format!("{}: boolean byte 2", v.name));
                    2
                } else {
                    rng.below(2) as u8
                };
            }
            Repr::Str => {
                let n = rng.below(12);
                let mut s: Vec<u8> = (0..n).map(|_| b'a' + rng.below(26) as u8).collect();
                if n > 0 && rng.below(8) == 0 {
                    s[rng.below(n)] = 0xff;
                    what.push(format!("{}: not UTF-8", v.name));
                }
                if rng.below(12) == 0 {
                    what.push(format!("{}: outside the area", v.name));
                    descs.push((at, Err(area + rng.below(64) as u32), n as u32));
                } else {
                    descs.push((at, Ok(parts.len()), n as u32));
                }
                parts.push((s, 1));
            }
            Repr::Seq { esize, ealign } => {
                let mut n = rng.below(6) as u32;
                if let Some(max) = v.count_max
                    && u64::from(max + 1) * u64::from(esize) <= 1 << 20
                    && rng.below(4) == 0
                {
                    // One more than its length's type counts, or exactly
                    // as many.
                    n = max + rng.below(2) as u32;
                    what.push(format!("{}: {n} elements (at most {max})", v.name));
                }
                let bytes: Vec<u8> = (0..n as usize * esize as usize)
                    .map(|_| rng.next_u64() as u8)
                    .collect();
                if rng.below(12) == 0 {
                    what.push(format!("{}: outside the area", v.name));
                    descs.push((at, Err(area + rng.below(64) as u32), n));
                } else {
                    descs.push((at, Ok(parts.len()), n));
                }
                parts.push((bytes, ealign.max(1) as usize));
            }
            Repr::Prim(_) | Repr::Agg { .. } => {}
        }
    }
    Request {
        key,
        record,
        area: parts,
        descs,
        what: if what.is_empty() {
            "valid".into()
        } else {
            what.join(", ")
        },
    }
}

/// Sends `r` (of the operation planned by `p`) on `c`: the area parts,
/// the descriptors, the call; the reply's values or its status.
fn send(c: &mut ClientEnd, r: &Request, p: &OpPlan, structs: &[StructDef]) -> Answer {
    c.begin();
    let mut offs = Vec::new();
    for (bytes, align) in &r.area {
        offs.push(
            c.put(bytes, *align)
                .expect("the area holds a request's strings"),
        );
    }
    let mut rec = r.record.clone();
    for &(at, part, n) in &r.descs {
        let off = match part {
            Ok(k) => offs[k],
            Err(off) => off,
        };
        rec[at..at + 4].copy_from_slice(&off.to_ne_bytes());
        rec[at + 4..at + 8].copy_from_slice(&n.to_ne_bytes());
    }
    match c.call_raw(r.key, &rec) {
        Ok(b) => {
            let b = b.to_vec();
            reply(c, p, structs, &b)
        }
        Err(CallError::Status(s)) => Err(s),
        Err(e) => panic!("not a status: {e}"),
    }
}

/// Whether gcc runs; without it the C server is left out, or the test
/// fails if `IDL_REQUIRE_GCC=1`.
fn have_gcc() -> bool {
    let ok = Command::new("gcc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok && std::env::var("IDL_REQUIRE_GCC").is_ok_and(|v| v == "1") {
        panic!("gcc is not installed and IDL_REQUIRE_GCC=1");
    }
    ok
}

/// A directory of its own under the system's temp directory, removed on
/// drop.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Compiles `case`'s generated C stubs, the C run time and the C client
/// harness ([`c_client_harness`]) into a shared library in `dir`.
fn c_library(dir: &Path, case: &Case, text: &str) -> PathBuf {
    let idl = idl::parse(text).expect("a random IDL the build compiled");
    let (h, c) = idl::gen_c::generate(&idl, case.name);
    std::fs::write(dir.join(format!("{}.h", case.name)), h).expect("write");
    std::fs::write(dir.join(format!("{}.c", case.name)), c).expect("write");
    let harness = dir.join(format!("{}_client.c", case.name));
    std::fs::write(&harness, c_client_harness(&idl, case.name)).expect("write");
    let rt = Path::new(env!("CARGO_MANIFEST_DIR")).join("../idl/c");
    let lib = dir.join(format!("lib{}.so", case.name));
    let out = Command::new("gcc")
        .args([
            "-std=c11", "-Wall", "-Werror", "-O1", "-shared", "-fPIC", "-I",
        ])
        .arg(&rt)
        .arg("-I")
        .arg(dir)
        .arg(dir.join(format!("{}.c", case.name)))
        .arg(&harness)
        .arg(rt.join("idl_rt.c"))
        .arg("-o")
        .arg(&lib)
        .output()
        .expect("run gcc");
    assert!(
        out.status.success(),
        "gcc failed on {}:\n{}",
        case.idl_path,
        String::from_utf8_lossy(&out.stderr)
    );
    lib
}

/// The C libraries of every case, built once for both tests (gcc is the
/// slow part) and each loaded once for the process's life, so that their
/// directory can go at once: a later `dlopen` of the same path finds the
/// loaded library by its name. `None` without gcc.
fn c_libraries() -> Option<&'static Vec<PathBuf>> {
    static LIBS: std::sync::OnceLock<Option<Vec<PathBuf>>> = std::sync::OnceLock::new();
    LIBS.get_or_init(|| {
        if !have_gcc() {
            return None;
        }
        let dir =
            TempDir(std::env::temp_dir().join(format!("idl-differential-{}", std::process::id())));
        std::fs::create_dir_all(&dir.0).expect("create the temp dir");
        let only = std::env::var("IDL_PROPTEST_ONLY").ok();
        let libs = CASES
            .iter()
            .map(|case| {
                if only.as_deref().is_some_and(|o| o != case.name) {
                    return PathBuf::new();
                }
                let text = std::fs::read_to_string(case.idl_path).expect("the build's IDL file");
                let lib = c_library(&dir.0, case, &text);
                let path = CString::new(lib.as_os_str().as_encoded_bytes()).expect("a path");
                // SAFETY: a library gcc just built from the generated C, the
                // harness and the C run time; no initializers. It stays
                // loaded (the handle is never closed).
                let handle =
                    unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
                assert!(!handle.is_null(), "dlopen {}", lib.display());
                lib
            })
            .collect();
        Some(libs)
    })
    .as_ref()
}

/// A C server library loaded into this process: its channel functions and
/// the interface's server loop.
struct CServer {
    handle: *mut c_void,
    map: unsafe extern "C" fn(*mut c_void, c_int) -> c_int,
    unmap: unsafe extern "C" fn(*mut c_void),
    serve: unsafe extern "C" fn(*mut c_void, *const usize, *mut c_void) -> c_int,
}

impl CServer {
    /// Loads `lib` and finds the server loop of `iface` (its C name).
    fn load(lib: &Path, iface: &str) -> CServer {
        let path = CString::new(lib.as_os_str().as_encoded_bytes()).expect("a path");
        // SAFETY: a library gcc just built from the generated C and the C
        // run time; its initializers are C's (none).
        let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        assert!(!handle.is_null(), "dlopen {}", lib.display());
        let sym = |name: &str| {
            let n = CString::new(name).expect("a name");
            // SAFETY: a symbol of the open library.
            let f = unsafe { libc::dlsym(handle, n.as_ptr()) };
            assert!(!f.is_null(), "{}: no symbol {name}", lib.display());
            f
        };
        let (map, unmap, serve) = (
            sym("idl_channel_map"),
            sym("idl_channel_unmap"),
            sym(&format!("{iface}_serve")),
        );
        // SAFETY: the run time's and the generated code's signatures
        // (idl_rt.h: `int idl_channel_map(idl_channel *, int)`, `void
        // idl_channel_unmap(idl_channel *)`; `int <iface>_serve(idl_server
        // *, const <iface>_impl *, void *)`, the table being one function
        // pointer per operation).
        unsafe {
            CServer {
                handle,
                map: std::mem::transmute::<
                    *mut c_void,
                    unsafe extern "C" fn(*mut c_void, c_int) -> c_int,
                >(map),
                unmap: std::mem::transmute::<*mut c_void, unsafe extern "C" fn(*mut c_void)>(unmap),
                serve: std::mem::transmute::<
                    *mut c_void,
                    unsafe extern "C" fn(*mut c_void, *const usize, *mut c_void) -> c_int,
                >(serve),
            }
        }
    }

    /// Serves the channel `fd` until the client closes it, answering with
    /// [`c_function`]s for `ops`.
    fn serve(&self, fd: std::os::fd::OwnedFd, ops: &COps<'_>) {
        let table: Vec<usize> = c_functions()[..ops.plans.len()].to_vec();
        // Room for an `idl_channel` (a few pointers and words), aligned.
        let mut ch = vec![0u64; 64];
        let chp = ch.as_mut_ptr().cast::<c_void>();
        // SAFETY: `ch` is zeroed room for the channel struct; the C run
        // time owns `fd` from here (closed by unmap).
        let st = unsafe { (self.map)(chp, fd.into_raw_fd()) };
        assert_eq!(st, 0, "idl_channel_map");
        // SAFETY: the table has one function per operation with the
        // arguments the stubs pass (each `c_function` reads them as
        // `c_args` says); `ops` outlives the loop.
        let st = unsafe {
            (self.serve)(
                chp,
                table.as_ptr(),
                (ops as *const COps<'_>).cast_mut().cast(),
            )
        };
        assert_eq!(st, 0, "the C server loop ends cleanly");
        // SAFETY: the channel mapped above.
        unsafe { (self.unmap)(chp) };
    }
}

impl Drop for CServer {
    fn drop(&mut self) {
        // SAFETY: nothing of the library runs any more.
        unsafe { libc::dlclose(self.handle) };
    }
}

// SAFETY: the library's functions may run on any thread (one channel per
// thread); the handle is only closed on drop.
unsafe impl Sync for CServer {}

/// Checks that the C server functions' arguments, as [`c_args`] reads
/// them, are as many as the generated header declares.
fn check_c_args(h: &str, iface: &str, plans: &[OpPlan]) {
    let table = &h[h
        .find(&format!("typedef struct {iface}_impl {{"))
        .expect("the impl table")..];
    let lines: Vec<&str> = table.lines().skip(1).take(plans.len()).collect();
    for (p, line) in plans.iter().zip(lines) {
        let params = line[line.find("(void *self").expect("a function pointer")..]
            .matches(',')
            .count();
        assert_eq!(
            c_args(p).len(),
            params,
            "the test reads the C server function `{}` with another number of arguments than it has",
            line.trim()
        );
        assert!(
            params <= C_MAX_ARGS,
            "{}: over {C_MAX_ARGS} arguments",
            line.trim()
        );
    }
}

/// The C name of an interface's server loop in the header `h`.
fn c_iface(h: &str) -> &str {
    let serve = h
        .find("_serve(idl_server *s, const ")
        .expect("the header declares a serve function");
    let start = h[..serve].rfind(' ').map_or(0, |i| i + 1);
    &h[start..serve]
}

/// What one interface's run found: disagreements (one line each), whether
/// it had a dynamic server, and the requests answered with values.
struct Run {
    disagreements: Vec<String>,
    dynamic: bool,
    compared: usize,
}

/// Runs `requests` requests of `case` against the three servers.
fn differ(
    case: &Case,
    seed: u64,
    requests: usize,
    c_lib: Option<&Path>,
    tally: &mut std::collections::BTreeMap<String, usize>,
) -> Run {
    let text = std::fs::read_to_string(case.idl_path).expect("the build's IDL file");
    let idl = idl::parse(&text).expect("a random IDL the build compiled");
    let iface = &idl.interfaces[0];
    let structs = &idl.structs[..];
    let plans: Vec<OpPlan> = iface
        .ops
        .iter()
        .map(|op| plan(structs, op).expect("a checked operation plans"))
        .collect();
    let dynamic =
        idl::dynamic::Interface::load(&text, &iface.name).expect("the dynamic stubs load");
    let dyn_ops: Vec<DynOp<'_>> = plans.iter().map(|plan| DynOp { plan, structs }).collect();
    let handlers: Vec<(&str, idl::dynamic::Handler)> = iface
        .ops
        .iter()
        .zip(&dyn_ops)
        .map(|(op, ctx)| {
            // SAFETY: `dyn_handler` reads its arguments by the handler
            // conventions for the operation its context plans; the
            // context outlives the server.
            let h = unsafe {
                idl::dynamic::Handler::new(
                    dyn_handler as *const () as usize,
                    (ctx as *const DynOp<'_>).cast_mut().cast(),
                )
            };
            (op.name.as_str(), h)
        })
        .collect();
    // SAFETY: see the handlers above. An operation with more arguments
    // than a handler call can pass has no dynamic server (a typed error):
    // its interface runs without one.
    let dyn_server = unsafe { dynamic.server(&handlers) }.ok();
    let c_ops = COps {
        plans: &plans,
        structs,
    };
    let c_server = c_lib.map(|lib| {
        let (h, _) = idl::gen_c::generate(&idl, case.name);
        check_c_args(&h, c_iface(&h), &plans);
        CServer::load(lib, c_iface(&h))
    });

    let (mut rust_c, mut rust_s) = shm::pair(&channel_config()).expect("a channel");
    let (mut dyn_c, mut dyn_s) = shm::pair(&channel_config()).expect("a channel");
    let mut c_side = c_server.as_ref().map(|_| {
        let fd = shm::create(&channel_config()).expect("a channel");
        let client = ClientEnd::from_fd(fd.try_clone().expect("dup")).expect("a client end");
        (client, fd)
    });
    let c_fd = c_side.as_mut().map(|(_, fd)| fd.try_clone().expect("dup"));
    let area = rust_c.area_len() as u32;
    let mut out = Vec::new();
    let mut compared = 0;
    std::thread::scope(|sc| {
        let rust = sc.spawn(move || (case.serve_answers)(&mut rust_s));
        let dynt = dyn_server
            .as_ref()
            .map(|d| sc.spawn(|| d.serve(&mut dyn_s)));
        let ct = c_server
            .as_ref()
            .zip(c_fd)
            .map(|(s, fd)| sc.spawn(|| s.serve(fd, &c_ops)));
        let mut rng = Rng::new(seed);
        for n in 0..requests {
            let k = rng.below(plans.len());
            let p = &plans[k];
            let r = request(
                &mut rng,
                k as u16,
                p,
                iface.ops[k].layout.request_size as usize,
                area,
            );
            CURRENT_REQUEST.store(seed ^ n as u64, Ordering::Relaxed);
            let a = send(&mut rust_c, &r, p, structs);
            let d = dynt.is_some().then(|| send(&mut dyn_c, &r, p, structs));
            let c = c_side.as_mut().map(|(c, _)| send(c, &r, p, structs));
            *tally.entry(status(&a).to_string()).or_default() += 1;
            compared += usize::from(a.is_ok());
            for (who, other) in [("dynamic", &d), ("C", &c)] {
                if let Some(why) = other.as_ref().and_then(|o| disagreement(&a, o)) {
                    out.push(format!(
                        "request {n}, `{}` ({}): the Rust and {who} servers differ: {why}",
                        iface.ops[k].name, r.what,
                    ));
                }
            }
        }
        drop(rust_c);
        drop(dyn_c);
        drop(c_side);
        rust.join()
            .expect("the Rust server thread")
            .expect("the Rust server ends cleanly");
        if let Some(t) = dynt {
            t.join()
                .expect("the dynamic server thread")
                .expect("the dynamic server ends cleanly");
        }
        if let Some(t) = ct {
            t.join().expect("the C server thread");
        }
    });
    Run {
        disagreements: out,
        dynamic: dyn_server.is_some(),
        compared,
    }
}

#[test]
fn rust_c_and_dynamic_servers_answer_the_same_requests_alike() {
    let seed = env_u64("IDL_PROPTEST_RUN_SEED").unwrap_or(DEFAULT_RUN_SEED);
    let requests = env_u64("IDL_DIFF_REQUESTS").map_or(DEFAULT_REQUESTS, |n| n as usize);
    let only = std::env::var("IDL_PROPTEST_ONLY").ok();
    let libs = c_libraries();
    let gcc = libs.is_some();
    let mut failures = Vec::new();
    let mut ran = 0;
    let mut dynamic = 0;
    let mut compared = 0;
    let mut tally = std::collections::BTreeMap::new();
    for (i, case) in CASES.iter().enumerate() {
        if only.as_deref().is_some_and(|o| o != case.name) {
            continue;
        }
        ran += 1;
        let lib = libs.map(|l| l[i].clone());
        let mut r = Rng::fork(seed, i as u64);
        let run = differ(case, r.next_u64(), requests, lib.as_deref(), &mut tally);
        dynamic += usize::from(run.dynamic);
        compared += run.compared;
        if !run.disagreements.is_empty() {
            failures.push(format!(
                "{} ({}), {} of {requests} requests:\n  {}",
                case.name,
                case.idl_path,
                run.disagreements.len(),
                run.disagreements.join("\n  ")
            ));
        }
    }
    eprintln!(
        "{ran} interfaces, {requests} requests each; servers: Rust, dynamic ({dynamic} of {ran} interfaces){}; \
         {compared} replies compared value by value",
        if gcc { ", C" } else { " (no gcc: C left out)" }
    );
    for (status, n) in &tally {
        eprintln!("  {n:5} {status}");
    }
    assert!(
        failures.is_empty(),
        "the servers disagree (IDL_PROPTEST_RUN_SEED={seed:#x}):\n{}",
        failures.join("\n")
    );
}

// ---- refusals before sending: the Rust and the C client stubs

/// Whether each argument of operation `op`'s C client stub after the
/// channel is an address (`true`) or an integer (docs/idl.md, "Generated
/// C"): declared parameters in order, `size_is` lengths included; a
/// string or sequence without `size_is` takes a `uint32_t` length after
/// its pointer, by value when in and for an inout sequence, else through
/// a pointer; the return value through a last pointer.
fn c_client_args(op: &idl::model::Op) -> Vec<bool> {
    let mut out = Vec::new();
    for p in &op.params {
        match (&p.ty, p.dir) {
            (Type::Prim(_), d) => out.push(d != Dir::In),
            (Type::Struct(_) | Type::Array(..), _) => out.push(true),
            (ty, d) => {
                out.push(true);
                if p.size_is.is_none() {
                    out.push(match d {
                        Dir::In => false,
                        Dir::InOut => *ty == Type::String,
                        Dir::Out => true,
                    });
                }
            }
        }
    }
    if op.ret.is_some() {
        out.push(true);
    }
    out
}

/// The C client harness of an interface: `idlh_call(c, k, a)` calls
/// operation `k`'s generated client stub on the channel `c` with the
/// words `a` as its arguments ([`c_client_args`]: an integer converted to
/// the parameter's type, an address as a `void *`, which C converts to
/// the parameter's pointer type), and returns the stub's status.
fn c_client_harness(idl: &idl::model::Idl, stem: &str) -> String {
    let iface = &idl.interfaces[0];
    let mut c = format!(
        "/* The C client harness of {stem}: generated by tests/differential.rs. */\n\
         #include \"{stem}.h\"\n\n\
         int idlh_call(idl_client *c, int k, const uint64_t *a);\n\n\
         int idlh_call(idl_client *c, int k, const uint64_t *a)\n{{\n    switch (k) {{\n"
    );
    for (k, op) in iface.ops.iter().enumerate() {
        // The C stub's name (idl::gen_c): the interface's name and `_`
        // before the operation's, unless the operation's starts with them.
        let prefix = format!("{}_", iface.name);
        let name = if op.name.starts_with(&prefix) {
            op.name.clone()
        } else {
            format!("{prefix}{}", op.name)
        };
        let args: Vec<String> = c_client_args(op)
            .iter()
            .enumerate()
            .map(|(i, &ptr)| {
                if ptr {
                    format!("(void *)(uintptr_t)a[{i}]")
                } else {
                    format!("a[{i}]")
                }
            })
            .collect();
        let mut call = vec!["c".to_string()];
        call.extend(args);
        c.push_str(&format!(
            "    case {k}:\n        return {name}({});\n",
            call.join(", ")
        ));
    }
    c.push_str("    default:\n        return -1;\n    }\n}\n");
    c
}

/// What an operation's plan says a client does with the values of one
/// call: send it, or refuse it before sending for the first check that
/// fails, in record order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// Every check passes: the request goes to the server.
    Send,
    /// A `size_is` sequence longer than its length's type counts
    /// (`CallError::CountTooLarge`).
    Count,
    /// A string or sequence over the per-string limit
    /// (`CallError::StringTooLong`).
    TooLong,
    /// More strings than the message may carry (`CallError::TooManyStrings`).
    TooMany,
    /// The string area has no room (`CallError::AreaFull`).
    AreaFull,
}

impl std::fmt::Display for Expect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Expect::Send => "sent",
            Expect::Count => "refused: count over its length's type",
            Expect::TooLong => "refused: over the per-string limit",
            Expect::TooMany => "refused: too many strings",
            Expect::AreaFull => "refused: string area full",
        })
    }
}

/// What the plan `p` expects of a call whose in and inout strings and
/// sequences have `lens` elements, on a channel of `limits` and an
/// `area`-byte string area: the client's checks ([`OpPlan::client_checks`])
/// and the transport's `put` of each in record order.
fn expect(p: &OpPlan, lens: &[(usize, usize)], limits: &idl::Limits, area: usize) -> Expect {
    let (mut used, mut strings) = (0usize, 0u32);
    for &i in &p.request {
        let (esize, ealign) = match p.values[i].repr {
            Repr::Str => (1, 1),
            Repr::Seq { esize, ealign } => (esize as usize, ealign as usize),
            _ => continue,
        };
        let n = lens
            .iter()
            .find(|(j, _)| *j == i)
            .map(|&(_, n)| n)
            .expect("the probe reports every in string and sequence");
        if OpPlan::count(&p.client_checks, i).is_some_and(|max| n > max as usize) {
            return Expect::Count;
        }
        let bytes = n * esize;
        if bytes > limits.max_string_bytes as usize {
            return Expect::TooLong;
        }
        if strings >= limits.max_strings {
            return Expect::TooMany;
        }
        let at = used.next_multiple_of(ealign.max(1));
        if at > area || bytes > area - at {
            return Expect::AreaFull;
        }
        used = at + bytes;
        strings += 1;
    }
    Expect::Send
}

/// The dynamic client's form of `v`, a value of type `ty`.
fn to_dyn(structs: &[StructDef], ty: &Type, v: &Value) -> idl::dynamic::Value {
    use idl::dynamic::{Seq, Value as D};
    let int = |v: &Value| match v {
        Value::Int(x) => *x,
        _ => panic!("an integer's value"),
    };
    let list = |v: &Value| match v {
        Value::List(xs) => xs.clone(),
        _ => panic!("a list's value"),
    };
    match (ty, v) {
        (Type::Prim(Prim::Bool), Value::Bool(b)) => D::Bool(*b),
        (Type::Prim(p), v) => {
            let x = int(v);
            match p {
                Prim::I8 => D::I8(x as i8),
                Prim::U8 => D::U8(x as u8),
                Prim::Char => D::Char(x as u8),
                Prim::I16 => D::I16(x as i16),
                Prim::U16 => D::U16(x as u16),
                Prim::I32 => D::I32(x as i32),
                Prim::U32 => D::U32(x as u32),
                Prim::I64 => D::I64(x as i64),
                Prim::U64 => D::U64(x as u64),
                Prim::Bool => panic!("a boolean's value"),
            }
        }
        (Type::String, Value::Str(s)) => D::Str(s.clone()),
        (Type::Sequence(e) | Type::Array(e, _), v) => {
            let xs = list(v);
            D::Seq(match &**e {
                Type::Prim(Prim::I8) => Seq::I8(xs.iter().map(|x| int(x) as i8).collect()),
                Type::Prim(Prim::U8 | Prim::Char) => {
                    Seq::U8(xs.iter().map(|x| int(x) as u8).collect())
                }
                Type::Prim(Prim::I16) => Seq::I16(xs.iter().map(|x| int(x) as i16).collect()),
                Type::Prim(Prim::U16) => Seq::U16(xs.iter().map(|x| int(x) as u16).collect()),
                Type::Prim(Prim::I32) => Seq::I32(xs.iter().map(|x| int(x) as i32).collect()),
                Type::Prim(Prim::U32) => Seq::U32(xs.iter().map(|x| int(x) as u32).collect()),
                Type::Prim(Prim::I64) => Seq::I64(xs.iter().map(|x| int(x) as i64).collect()),
                Type::Prim(Prim::U64) => Seq::U64(xs.iter().map(|x| int(x) as u64).collect()),
                e => Seq::Values(xs.iter().map(|x| to_dyn(structs, e, x)).collect()),
            })
        }
        (Type::Struct(id), v) => D::Struct(
            structs[*id]
                .fields
                .iter()
                .zip(list(v))
                .map(|((_, fty), x)| to_dyn(structs, fty, &x))
                .collect(),
        ),
        (ty, v) => panic!("a value {v:?} of no form of {ty:?}"),
    }
}

/// What a Rust client stub's error says it refused, if it refused.
fn rust_refusal(e: &CallError) -> Option<Expect> {
    match e {
        CallError::CountTooLarge { .. } => Some(Expect::Count),
        CallError::StringTooLong { .. } => Some(Expect::TooLong),
        CallError::TooManyStrings { .. } => Some(Expect::TooMany),
        CallError::AreaFull { .. } => Some(Expect::AreaFull),
        _ => None,
    }
}

/// The C run time's status for a request over a limit (idl_rt.h).
const IDL_E_LIMIT: i32 = 257;

/// The limits of the refusal channels: small, so that strings over the
/// per-string limit, a full area and too many strings are cheap to reach.
fn refusal_config() -> shm::Config {
    shm::Config {
        area: 4096,
        limits: idl::Limits {
            max_strings: 3,
            max_string_bytes: 1536,
            ..idl::Limits::default()
        },
        ..shm::Config::default()
    }
}

/// Runs `calls` probes of `case` (C library `lib`): each call's values
/// through the C and the Rust client stubs; returns the disagreements
/// with the plan (one line each) and tallies the expectations met.
fn refusals(
    case: &Case,
    seed: u64,
    calls: usize,
    lib: &Path,
    tally: &mut std::collections::BTreeMap<String, usize>,
) -> Vec<String> {
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;

    let text = std::fs::read_to_string(case.idl_path).expect("the build's IDL file");
    let idl = idl::parse(&text).expect("a random IDL the build compiled");
    let iface = &idl.interfaces[0];
    let plans: Vec<OpPlan> = iface
        .ops
        .iter()
        .map(|op| plan(&idl.structs, op).expect("a checked operation plans"))
        .collect();
    let arity: Vec<usize> = iface.ops.iter().map(|op| c_client_args(op).len()).collect();

    let path = CString::new(lib.as_os_str().as_encoded_bytes()).expect("a path");
    // SAFETY: the library `c_libraries` built and keeps loaded.
    let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    assert!(!handle.is_null(), "dlopen {}", lib.display());
    let sym = |name: &str| {
        let n = CString::new(name).expect("a name");
        // SAFETY: a symbol of the open library.
        let f = unsafe { libc::dlsym(handle, n.as_ptr()) };
        assert!(!f.is_null(), "{}: no symbol {name}", lib.display());
        f
    };
    // SAFETY: the run time's and the harness's signatures (idl_rt.h;
    // `c_client_harness`).
    let (map, unmap, call) = unsafe {
        (
            std::mem::transmute::<*mut c_void, unsafe extern "C" fn(*mut c_void, c_int) -> c_int>(
                sym("idl_channel_map"),
            ),
            std::mem::transmute::<*mut c_void, unsafe extern "C" fn(*mut c_void)>(sym(
                "idl_channel_unmap",
            )),
            std::mem::transmute::<
                *mut c_void,
                unsafe extern "C" fn(*mut c_void, c_int, *const u64) -> c_int,
            >(sym("idlh_call")),
        )
    };

    let config = refusal_config();
    let dynamic = idl::dynamic::Interface::from_idl(
        &idl,
        &iface.name,
        config.limits,
        idl::dynamic::Engine::Native,
    )
    .expect("the dynamic stubs load");
    let mut dyn_client = dynamic.client();
    let (mut dyn_c, dyn_s) = shm::pair(&config).expect("a channel");
    let (mut rust_c, rust_s) = shm::pair(&config).expect("a channel");
    let c_fd = shm::create(&config).expect("a channel");
    let c_s = shm::ServerEnd::from_fd(c_fd.try_clone().expect("dup")).expect("a server end");
    // Room for an `idl_channel` (a few pointers and words), aligned.
    let mut ch = vec![0u64; 64];
    let chp = ch.as_mut_ptr().cast::<c_void>();
    // SAFETY: zeroed room for the channel struct; the C run time owns the
    // fd from here (closed by unmap).
    let mapped = unsafe { map(chp, c_fd.into_raw_fd()) };
    assert_eq!(mapped, 0, "idl_channel_map");
    let area = rust_c.area_len();
    let (rust_sent, c_sent, dyn_sent) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
    );
    let mut out = Vec::new();
    std::thread::scope(|sc| {
        let mut rs = idl_proptest::Counting {
            inner: rust_s,
            received: rust_sent.clone(),
        };
        let mut cs = idl_proptest::Counting {
            inner: c_s,
            received: c_sent.clone(),
        };
        let mut ds = idl_proptest::Counting {
            inner: dyn_s,
            received: dyn_sent.clone(),
        };
        let rt = sc.spawn(move || (case.serve_answers)(&mut rs));
        let ct = sc.spawn(move || (case.serve_answers)(&mut cs));
        let dt = sc.spawn(move || (case.serve_answers)(&mut ds));
        let mut rng = Rng::new(seed);
        for n in 0..calls {
            // (The servers' answers do not matter here, so the request
            // number they draw them from, which the other test sets, is
            // left alone.)
            let k = rng.below(plans.len());
            let before = (
                rust_sent.load(Ordering::SeqCst),
                c_sent.load(Ordering::SeqCst),
                dyn_sent.load(Ordering::SeqCst),
            );
            let mut words_ok = true;
            let mut c_call = |k: usize, words: &[u64]| {
                words_ok = words.len() == arity[k];
                if !words_ok {
                    return -1;
                }
                // SAFETY: the words are the C stub's arguments in its order
                // (checked: as many), addresses of live values of the C
                // types' layouts (the probe's); the channel is mapped.
                unsafe { call(chp, k as c_int, words.as_ptr()) }
            };
            let mut probe_rng = Rng::fork(seed, n as u64);
            let r = (case.refusal)(&mut rust_c, k, &mut probe_rng, 1536, &mut c_call);
            assert!(
                words_ok,
                "{}: the probe passes another number of arguments than the C stub of `{}` takes",
                case.name, iface.ops[k].name
            );
            // The dynamic client, with the values the Rust stub got (its
            // `Value`s carry what Rust's types carry).
            let op_model = &iface.ops[k];
            let mut args: Vec<idl::dynamic::Value> = op_model
                .params
                .iter()
                .enumerate()
                .filter(|(_, p)| p.length_of.is_none())
                .map(|(i, p)| match r.values.iter().find(|(j, _)| *j == i) {
                    Some((_, v)) => to_dyn(&idl.structs, &p.ty, v),
                    None => idl::dynamic::Value::Void,
                })
                .collect();
            let dyn_r = dyn_client.call(&mut dyn_c, k, &mut args);
            let want = expect(&plans[k], &r.lens, &config.limits, area);
            let sent = (
                rust_sent.load(Ordering::SeqCst) > before.0,
                c_sent.load(Ordering::SeqCst) > before.1,
                dyn_sent.load(Ordering::SeqCst) > before.2,
            );
            let dyn_outcome = match &dyn_r {
                _ if sent.2 => Some(Expect::Send),
                Err(idl::dynamic::CallError::Transport(e)) => rust_refusal(e),
                _ => None,
            };
            if dyn_outcome != Some(want) {
                let how = match &dyn_r {
                    Ok(_) => "ok".to_string(),
                    Err(e) => e.to_string(),
                };
                out.push(format!(
                    "call {n}, `{}` ({:?} elements): the plan says {want}; the dynamic client {} ({how})",
                    op_model.name,
                    r.lens,
                    if sent.2 { "sent it" } else { "did not send it" },
                ));
            }
            // Sent, or refused for a reason its error names; `None`
            // (neither) is always a disagreement.
            let rust = match &r.rust {
                _ if sent.0 => Some(Expect::Send),
                Err(e) => rust_refusal(e),
                Ok(()) => None,
            };
            let op = &iface.ops[k].name;
            if rust != Some(want) {
                let how = match &r.rust {
                    Ok(()) => "ok".to_string(),
                    Err(e) => e.to_string(),
                };
                out.push(format!(
                    "call {n}, `{op}` ({:?} elements): the plan says {want}; the Rust client {} ({how})",
                    r.lens,
                    if sent.0 { "sent it" } else { "did not send it" },
                ));
            }
            match r.c {
                None => *tally.entry("C: not expressible".into()).or_default() += 1,
                Some(st) => {
                    let refused = !sent.1 && st == IDL_E_LIMIT;
                    if refused != (want != Expect::Send) || sent.1 == refused {
                        out.push(format!(
                            "call {n}, `{op}` ({:?} elements): the plan says {want}; the C client {} (status {st})",
                            r.lens,
                            if sent.1 { "sent it" } else { "did not send it" },
                        ));
                    }
                }
            }
            *tally.entry(want.to_string()).or_default() += 1;
        }
        drop(rust_c);
        drop(dyn_c);
        // SAFETY: the channel mapped above; closing it ends the server.
        unsafe { unmap(chp) };
        dt.join()
            .expect("the dynamic client's server thread")
            .expect("it ends cleanly");
        rt.join()
            .expect("the Rust client's server thread")
            .expect("it ends cleanly");
        ct.join()
            .expect("the C client's server thread")
            .expect("it ends cleanly");
    });
    // SAFETY: opened above; `c_libraries` keeps its own handle.
    unsafe { libc::dlclose(handle) };
    out
}

#[test]
fn rust_c_and_dynamic_clients_refuse_the_same_calls_before_sending() {
    let Some(libs) = c_libraries() else {
        eprintln!("no gcc: the C client left out");
        return;
    };
    let seed = env_u64("IDL_PROPTEST_RUN_SEED").unwrap_or(DEFAULT_RUN_SEED);
    let calls = env_u64("IDL_REFUSAL_CALLS").map_or(DEFAULT_REFUSAL_CALLS, |n| n as usize);
    let only = std::env::var("IDL_PROPTEST_ONLY").ok();
    let mut failures = Vec::new();
    let mut tally = std::collections::BTreeMap::new();
    let mut ran = 0;
    for (i, case) in CASES.iter().enumerate() {
        if only.as_deref().is_some_and(|o| o != case.name) {
            continue;
        }
        ran += 1;
        let mut r = Rng::fork(seed ^ 0x2ef0_5a15, i as u64);
        let d = refusals(case, r.next_u64(), calls, &libs[i], &mut tally);
        if !d.is_empty() {
            failures.push(format!(
                "{} ({}), {} of {calls} calls:\n  {}",
                case.name,
                case.idl_path,
                d.len(),
                d.join("\n  ")
            ));
        }
    }
    eprintln!(
        "{ran} interfaces, {calls} calls each through the Rust, the C and the dynamic client stubs:"
    );
    for (what, n) in &tally {
        eprintln!("  {n:5} {what}");
    }
    assert!(
        failures.is_empty(),
        "the clients and the plan disagree (IDL_PROPTEST_RUN_SEED={seed:#x}):\n{}",
        failures.join("\n")
    );
}
