//! Property tests of the `idl` crate: random interfaces, compiled by its
//! `build.rs` helper ([`idl::compile`]), called with random values over the
//! shared-memory channel; the server must see exactly the client's values
//! and the client must get exactly the server's.
//!
//! Why a crate of its own: the interfaces go through `idl::compile` in a
//! build script, as a user's crate would compile its IDL, and a crate's
//! build script cannot use the crate it builds. So `idl` is this crate's
//! build dependency, and the generated stubs are ordinary code of this
//! crate. Nothing here is published or meant for use elsewhere.
//!
//! How it fits together:
//!
//! - `build.rs` draws [`CASES`]`.len()` random IDL files from a seed
//!   (`build/random_idl.rs`: every integer width and spelling, `boolean`,
//!   `char`, nested structs with arrays, fixed arrays, `string`,
//!   `sequence<T>` and `[size_is(n)] T *` in every direction, both
//!   syntaxes and both in one list, typedefs, constants, modules,
//!   comments, `void` and value returns), compiles each with
//!   `idl::compile`, and writes a harness for it (`build/harness.rs`): a
//!   server that reports each call's values, and a client driver that calls
//!   random operations with random values and compares;
//! - this library holds what those harnesses share: the [`Rng`], drawing
//!   random values ([`Arb`], [`string`], [`seq`]), their comparable form
//!   ([`Value`]) and the check of one call ([`check`]);
//! - `tests/random_interfaces.rs` runs every interface over `idl::rt::shm`
//!   (client and server threads), strings up to the 2 MiB limit, and every
//!   fourth over `idl::rt::unet`'s loop network; `tests/limits.rs` checks
//!   that the per-string limit, the string area and the strings per
//!   message give typed errors and leave the channel usable
//!   (`idl/limits.idl`, compiled by the same build script as
//!   [`fixed::limits`]).
//!
//! Seeds: `IDL_PROPTEST_SEED` (the interfaces, read by the build script)
//! and `IDL_PROPTEST_IFACES` (how many, 40 by default);
//! `IDL_PROPTEST_RUN_SEED`, `IDL_PROPTEST_CALLS` (200 per interface by
//! default) and `IDL_PROPTEST_ONLY` (one interface) for the values, read
//! by the tests. A failure prints the seeds that reproduce it and the
//! path of the failing IDL file; a valid random IDL that `idl::compile`
//! rejects fails the build with the error and the file.

mod rng;

use idl::rt::{CallError, ClientTransport, ServerTransport};
pub use rng::Rng;
use std::fmt;
use std::sync::mpsc::{Receiver, Sender};
use std::time::Duration;

/// A value in comparable form: what the client sent or got, what the
/// server received or answered.
#[derive(Clone, PartialEq, Eq)]
pub enum Value {
    /// Any integer or `char`.
    Int(i128),
    /// A `boolean`.
    Bool(bool),
    /// A `string`.
    Str(String),
    /// A struct's fields, an array's or a sequence's elements.
    List(Vec<Value>),
}

impl fmt::Debug for Value {
    /// Long strings and lists are cut, so that a report stays readable.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(v) => write!(f, "{v}"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Str(s) if s.len() > 40 => {
                let cut = (0..=40).rev().find(|&i| s.is_char_boundary(i)).unwrap_or(0);
                write!(f, "{:?}... ({} bytes)", &s[..cut], s.len())
            }
            Value::Str(s) => write!(f, "{s:?}"),
            Value::List(xs) if xs.len() > 8 => {
                write!(f, "{:?}... ({} elements)", &xs[..8], xs.len())
            }
            Value::List(xs) => f.debug_list().entries(xs).finish(),
        }
    }
}

/// The first place where `a` and `b` differ, as a path (`[3][1]`) and
/// both values there; `None` if they are equal.
pub fn difference(path: &str, a: &Value, b: &Value) -> Option<String> {
    match (a, b) {
        (Value::List(xs), Value::List(ys)) => {
            let inner = xs
                .iter()
                .zip(ys)
                .enumerate()
                .find_map(|(i, (x, y))| difference(&format!("{path}[{i}]"), x, y));
            match inner {
                Some(d) => Some(d),
                None if xs.len() != ys.len() => Some(format!(
                    "{path}: {} vs {} elements: {a:?} vs {b:?}",
                    xs.len(),
                    ys.len()
                )),
                None => None,
            }
        }
        (Value::Str(x), Value::Str(y)) if x != y => {
            let at = x
                .bytes()
                .zip(y.bytes())
                .position(|(p, q)| p != q)
                .unwrap_or(x.len().min(y.len()));
            Some(format!(
                "{path}: strings of {} and {} bytes differ from byte {at}: ...{:?}... vs ...{:?}...",
                x.len(),
                y.len(),
                around(x, at),
                around(y, at)
            ))
        }
        _ if a != b => Some(format!("{path}: {a:?} vs {b:?}")),
        _ => None,
    }
}

/// Up to 16 bytes either side of byte `at` of `s`, on character boundaries.
fn around(s: &str, at: usize) -> &str {
    let start = (0..=at.saturating_sub(16))
        .rev()
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(0);
    let end = (at + 16..=s.len())
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(s.len());
    &s[start..end.max(start)]
}

/// A random value of a plain-data type, drawn from an [`Rng`].
pub trait Arb: Sized {
    /// Draws a value.
    fn arb(rng: &mut Rng) -> Self;
}

/// The comparable form of a value.
pub trait ToValue {
    /// The value as a [`Value`].
    fn value(&self) -> Value;
}

macro_rules! ints {
    ($($t:ty),*) => {$(
        impl Arb for $t {
            /// Edge values (0, 1, -1, the minimum and the maximum) a
            /// quarter of the time, otherwise random bits.
            fn arb(rng: &mut Rng) -> Self {
                match rng.below(8) {
                    0 => rng.pick(&[0, 1, <$t>::MIN, <$t>::MAX, <$t>::MAX / 2, (0 as $t).wrapping_sub(1)]),
                    _ => rng.next_u64() as $t,
                }
            }
        }
        impl ToValue for $t {
            fn value(&self) -> Value {
                Value::Int(*self as i128)
            }
        }
    )*};
}
ints!(i8, u8, i16, u16, i32, u32, i64, u64);

impl Arb for bool {
    fn arb(rng: &mut Rng) -> Self {
        rng.next_u64() & 1 == 1
    }
}

impl ToValue for bool {
    fn value(&self) -> Value {
        Value::Bool(*self)
    }
}

impl<T: Arb, const N: usize> Arb for [T; N] {
    fn arb(rng: &mut Rng) -> Self {
        std::array::from_fn(|_| T::arb(rng))
    }
}

impl<T: ToValue> ToValue for [T] {
    fn value(&self) -> Value {
        Value::List(self.iter().map(T::value).collect())
    }
}

impl<T: ToValue, const N: usize> ToValue for [T; N] {
    fn value(&self) -> Value {
        self[..].value()
    }
}

impl<T: ToValue> ToValue for Vec<T> {
    fn value(&self) -> Value {
        self[..].value()
    }
}

impl ToValue for str {
    fn value(&self) -> Value {
        Value::Str(self.to_string())
    }
}

impl ToValue for String {
    fn value(&self) -> Value {
        Value::Str(self.clone())
    }
}

impl<T: ToValue + ?Sized> ToValue for &T {
    fn value(&self) -> Value {
        (**self).value()
    }
}

impl<T: ToValue + ?Sized> ToValue for &mut T {
    fn value(&self) -> Value {
        (**self).value()
    }
}

/// Bytes of one string or sequence the tests' channels accept: the
/// default per-string limit (L4's 2 MiB).
pub fn max_string_bytes() -> usize {
    idl::Limits::default().max_string_bytes as usize
}

/// Bytes of the string area the tests' channels get: room for a string
/// at the limit in the request and some in the reply (whose out strings
/// share the rest of the area in equal parts; the server draws its long
/// answers within its part).
pub fn area_bytes() -> usize {
    16 * max_string_bytes()
}

/// Per call, at most one string or sequence in each direction is long
/// (near the per-string limit): which of `n` it is, if any.
pub fn big_slot(rng: &mut Rng, n: usize) -> Option<usize> {
    (n > 0 && rng.chance(3)).then(|| rng.below(n))
}

/// A random length of at most `max` elements: often 0, mostly short;
/// `big` gives one within 16 of `max` (and `max` itself a quarter of the
/// time).
fn length(rng: &mut Rng, max: usize, big: bool) -> usize {
    if big {
        return if rng.chance(25) {
            max
        } else {
            max - rng.below(16.min(max) + 1)
        };
    }
    match rng.below(10) {
        0 | 1 => 0,
        2..=6 => rng.range(1, 16),
        _ => rng.range(17, 600),
    }
    .min(max)
}

/// A random UTF-8 string of at most `max` bytes: ASCII (NUL and control
/// characters included) with 2-, 3- and 4-byte characters; long ones
/// (`big`) are ASCII letters with a few multi-byte characters at the end,
/// to stay quick to draw.
pub fn string(rng: &mut Rng, big: bool, max: usize) -> String {
    let len = length(rng, max, big);
    let mut s = String::with_capacity(len);
    if big {
        while s.len() + 8 <= len.saturating_sub(64) {
            let bits = rng.next_u64();
            s.extend((0..8).map(|i| char::from(b'a' + ((bits >> (8 * i)) as u8 % 26))));
        }
    }
    while s.len() < len {
        let c = match rng.below(20) {
            0 => char::from(rng.below(32) as u8),
            1 => rng.pick(&['é', 'ß', 'ж']),
            2 => rng.pick(&['€', '中', '\u{fffd}']),
            3 => rng.pick(&['😀', '\u{10ffff}']),
            _ => char::from(rng.range(0x20, 0x7e) as u8),
        };
        if s.len() + c.len_utf8() <= len {
            s.push(c);
        } else {
            s.push('.');
        }
    }
    s
}

/// Elements of `T` in a sequence of at most `bytes` bytes.
pub fn elems<T>(bytes: usize) -> usize {
    bytes / size_of::<T>().max(1)
}

/// A random sequence of at most `max` elements.
pub fn seq<T: Arb>(rng: &mut Rng, big: bool, max: usize) -> Vec<T> {
    let len = length(rng, max, big);
    (0..len).map(|_| T::arb(rng)).collect()
}

/// What an out string or sequence holds before the call: junk the call
/// must replace.
pub fn junk<T: Junk>(rng: &mut Rng) -> T {
    T::junk(rng)
}

/// Junk for an out value before the call.
pub trait Junk {
    /// A value the call must overwrite.
    fn junk(rng: &mut Rng) -> Self;
}

impl Junk for String {
    fn junk(rng: &mut Rng) -> Self {
        "junk before the call ".repeat(rng.below(3))
    }
}

impl<T: Arb> Junk for Vec<T> {
    fn junk(rng: &mut Rng) -> Self {
        (0..rng.below(5)).map(|_| T::arb(rng)).collect()
    }
}

/// What the server received and answered in one call, sent to the client
/// side for comparison.
#[derive(Debug)]
pub struct Seen {
    /// The operation's name.
    pub op: &'static str,
    /// The in and inout values, in declaration order.
    pub received: Vec<Value>,
    /// The inout and out values and the return value, in declaration order.
    pub answered: Vec<Value>,
}

/// Checks one call of `op`: the server received `sent` (the values named
/// `sent_names`) and answered `got` (named `got_names`).
pub fn check(
    op: &str,
    sent_names: &[&str],
    got_names: &[&str],
    sent: Vec<Value>,
    got: Vec<Value>,
    seen: &Receiver<Seen>,
) -> Result<(), String> {
    let s = seen
        .recv_timeout(Duration::from_secs(30))
        .map_err(|e| format!("the server reported no call ({e})"))?;
    if s.op != op {
        return Err(format!("the server's method {} ran instead", s.op));
    }
    for (k, name) in sent_names.iter().enumerate() {
        if let Some(d) = difference("", &sent[k], &s.received[k]) {
            return Err(format!(
                "the server received a different {name} than the client sent: {name}{d}"
            ));
        }
    }
    for (k, name) in got_names.iter().enumerate() {
        if let Some(d) = difference("", &s.answered[k], &got[k]) {
            return Err(format!(
                "the client got a different {name} than the server answered: {name}{d}"
            ));
        }
    }
    Ok(())
}

// The server's side of out and inout strings and sequences: the runtime's
// `OutStr`, `OutSeq` (written straight into the string area).

/// What a writer holds: an inout string's value as the client sent it.
pub fn written(w: &mut idl::rt::OutStr<'_>) -> Value {
    match std::str::from_utf8(w.as_bytes()) {
        Ok(s) => Value::Str(s.to_string()),
        Err(e) => Value::Str(format!("<not UTF-8: {e}>")),
    }
}

/// The shared-memory channel the tests use: the default limits, a string
/// area of [`area_bytes`].
pub fn channel_config() -> idl::rt::shm::Config {
    idl::rt::shm::Config {
        area: area_bytes(),
        ..Default::default()
    }
}

/// Writes `v` into an out string (an inout string's writer is cleared
/// first). Should it not fit the string area, the
/// server stub replies `Overflow` and the client reports that.
pub fn answer_out_str(out: &mut idl::rt::OutStr<'_>, v: &str) {
    out.clear();
    let _ = out.push_str(v);
}

/// Writes `v` into an out sequence (as [`answer_out_str`]).
pub fn answer_out_seq<T: idl::rt::Plain>(out: &mut idl::rt::OutSeq<'_, T>, v: &[T]) {
    let _ = out.extend_from_slice(v);
}

// The answer rule of `tests/differential.rs`: the generated Rust server
// (each harness's `Filler`), the C server and the dynamic server all answer
// a request by this rule, so that their replies must agree value by value.

/// The number of the request the differential test is sending; every
/// server seeds its answers from it ([`Answers::current`]).
pub static CURRENT_REQUEST: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The answers to one request, drawn in one order by every server: for
/// each inout and out parameter in declaration order (`size_is` lengths
/// left out), then the return value:
///
/// - an integer, `char` or `boolean`: an out value is the next draw (cut to
///   its width; a `boolean` its low bit), an inout value the old one
///   xor'ed with it;
/// - a struct, its fields in order; an array, its elements in order;
/// - an inout sequence keeps its length, each element as an inout value;
///   an out sequence gets `draw % 4` elements, each as an out value;
/// - an inout string keeps its length, each byte `b'a' + (old + draw) % 26`;
///   an out string gets `draw % 5` bytes, each `b'a' + draw % 26`.
pub struct Answers(Rng);

impl Answers {
    /// The answers to the request numbered [`CURRENT_REQUEST`].
    pub fn current() -> Answers {
        let n = CURRENT_REQUEST.load(std::sync::atomic::Ordering::Relaxed);
        Answers(Rng::fork(0xa115_3e25, n))
    }

    /// The next draw.
    pub fn draw(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// An out string's text.
    pub fn out_string(&mut self) -> String {
        let n = self.draw() % 5;
        (0..n)
            .map(|_| char::from(b'a' + (self.draw() % 26) as u8))
            .collect()
    }

    /// An inout string's new byte for the old byte `old`.
    pub fn inout_byte(&mut self, old: u8) -> u8 {
        b'a' + (u64::from(old).wrapping_add(self.draw()) % 26) as u8
    }

    /// An out sequence's length.
    pub fn out_len(&mut self) -> usize {
        (self.draw() % 4) as usize
    }
}

/// A value the [`Answers`] rule writes.
pub trait Fill: Sized {
    /// A new out value.
    fn fill_out(a: &mut Answers) -> Self;
    /// An inout value's new value, from its old one.
    fn fill_inout(&mut self, a: &mut Answers);
}

macro_rules! fill_ints {
    ($($t:ty),*) => {$(
        impl Fill for $t {
            fn fill_out(a: &mut Answers) -> Self {
                a.draw() as $t
            }
            fn fill_inout(&mut self, a: &mut Answers) {
                *self ^= a.draw() as $t;
            }
        }
    )*};
}
fill_ints!(i8, u8, i16, u16, i32, u32, i64, u64);

impl Fill for bool {
    fn fill_out(a: &mut Answers) -> Self {
        a.draw() & 1 == 1
    }
    fn fill_inout(&mut self, a: &mut Answers) {
        *self ^= a.draw() & 1 == 1;
    }
}

impl<T: Fill, const N: usize> Fill for [T; N] {
    fn fill_out(a: &mut Answers) -> Self {
        std::array::from_fn(|_| T::fill_out(a))
    }
    fn fill_inout(&mut self, a: &mut Answers) {
        self.iter_mut().for_each(|x| x.fill_inout(a));
    }
}

/// Answers an inout string by the [`Answers`] rule.
pub fn fill_inout_str(w: &mut idl::rt::OutStr<'_>, a: &mut Answers) {
    let new: String = w
        .as_bytes()
        .to_vec()
        .into_iter()
        .map(|b| char::from(a.inout_byte(b)))
        .collect();
    w.clear();
    let _ = w.push_str(&new);
}

/// Answers an out string by the [`Answers`] rule.
pub fn fill_out_str(w: &mut idl::rt::OutStr<'_>, a: &mut Answers) {
    let _ = w.push_str(&a.out_string());
}

/// Answers an out sequence by the [`Answers`] rule.
pub fn fill_out_seq<T: idl::rt::Plain + Fill>(w: &mut idl::rt::OutSeq<'_, T>, a: &mut Answers) {
    for _ in 0..a.out_len() {
        let _ = w.push(T::fill_out(a));
    }
}

/// A harness's server by the [`Answers`] rule: `(transport)`; serves until
/// the client hangs up.
pub type ServeAnswers = fn(&mut (dyn ServerTransport + 'static)) -> Result<(), CallError>;

/// A harness's client driver: `(transport, seed, calls, lim, seen)`;
/// makes `calls` calls of random operations with values from `seed`
/// (strings and sequences of at most `lim` bytes) and checks each against
/// the server's report in `seen`.
pub type Drive = fn(
    &mut (dyn ClientTransport + 'static),
    u64,
    usize,
    usize,
    &Receiver<Seen>,
) -> Result<(), String>;

/// A harness's server: `(transport, seed, seen)`; serves until the client
/// hangs up, answering with values from `seed` and reporting each call to
/// `seen`.
pub type Serve =
    fn(&mut (dyn ServerTransport + 'static), u64, Sender<Seen>) -> Result<(), CallError>;

// ---- refusals before sending (tests/differential.rs)

/// What one call of [`Case::refusal`] did: the Rust client stub's
/// result, the C client stub's status (`None` where the C API cannot
/// express the values: a `size_is` sequence longer than its length's type
/// counts), and the element count of each in and inout string and sequence
/// (by parameter index), from which the test works out what the
/// operation's plan says the clients must do.
pub struct Refusal {
    /// The Rust client stub's result.
    pub rust: Result<(), CallError>,
    /// The C client stub's status, if it was called.
    pub c: Option<i32>,
    /// `(parameter index, elements)` of each in and inout string and
    /// sequence, in declaration order.
    pub lens: Vec<(usize, usize)>,
    /// `(parameter index, value)` of each in and inout parameter as the
    /// Rust stub got it (`size_is` lengths left out), for a third client.
    pub values: Vec<(usize, Value)>,
}

/// A harness's refusal probe: `(transport, operation, rng, lim, c)`; one
/// call of the operation with values drawn from `rng` around the
/// per-string limit `lim` (bytes): first through the C client stub by
/// `c(operation, words)` (the stub's arguments after the channel, each an
/// integer or an address, in its C order), then through the Rust client
/// stub on the transport, with the same values.
pub type RefusalProbe = fn(
    &mut (dyn ClientTransport + 'static),
    usize,
    &mut Rng,
    usize,
    &mut dyn FnMut(usize, &[u64]) -> i32,
) -> Refusal;

/// A length in elements for an in or inout string or sequence of the
/// refusal probe: short more than half the time, else up to the
/// per-string limit (`max` elements fit it) or just over it, or, where a
/// `size_is` length's type counts fewer (`bound`), around that bound.
fn hostile_len(rng: &mut Rng, max: usize, bound: Option<u32>) -> usize {
    match (rng.below(16), bound) {
        (0..=8, _) => rng.below(9),
        (12 | 13, Some(b)) if (b as usize) < max => b as usize - 1 + rng.below(3),
        (9..=12, _) => max.saturating_sub(rng.below(3)),
        _ => max + 1 + rng.below(3),
    }
}

/// A string for the refusal probe: ASCII letters, its length by
/// `hostile_len` around `lim` bytes.
pub fn hostile_string(rng: &mut Rng, lim: usize) -> String {
    let n = hostile_len(rng, lim, None);
    (0..n)
        .map(|_| char::from(b'a' + rng.below(26) as u8))
        .collect()
}

/// A sequence for the refusal probe: its length by `hostile_len` around
/// `lim` bytes and the count `bound` of its `size_is` length's type.
pub fn hostile_seq<T: Arb>(rng: &mut Rng, lim: usize, bound: Option<u32>) -> Vec<T> {
    let n = hostile_len(rng, elems::<T>(lim), bound);
    (0..n).map(|_| T::arb(rng)).collect()
}

/// The bytes the C client sends for the string `s`: the same bytes, but
/// now and then one made 0xff, so that they are not UTF-8 (which the C
/// API carries and Rust's `&str` cannot; the client checks no UTF-8, so
/// whether it sends must not change).
pub fn c_string(rng: &mut Rng, s: &str) -> Vec<u8> {
    let mut b = s.as_bytes().to_vec();
    if !b.is_empty() && rng.chance(12) {
        let at = rng.below(b.len());
        b[at] = 0xff;
    }
    b
}

/// An address as a word of [`Refusal`]'s C arguments: of a value the C
/// stub reads.
pub fn addr<T: ?Sized>(p: *const T) -> u64 {
    p.cast::<u8>() as usize as u64
}

/// An address as a word of [`Refusal`]'s C arguments: of a value the C
/// stub may write.
pub fn addr_mut<T: ?Sized>(p: *mut T) -> u64 {
    p.cast::<u8>() as usize as u64
}

/// A server transport that counts the requests it hands to its server:
/// how the refusal probe tells a call the client sent from one it refused.
pub struct Counting<T> {
    /// The transport.
    pub inner: T,
    /// Requests received so far.
    pub received: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

// SAFETY: every method but `wait`'s count is the inner transport's, so
// its guarantees are the inner transport's.
unsafe impl<T: ServerTransport> ServerTransport for Counting<T> {
    fn wait(&mut self) -> Result<(u16, usize), CallError> {
        let r = self.inner.wait()?;
        self.received
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(r)
    }
    fn buf(&mut self) -> std::ptr::NonNull<u8> {
        self.inner.buf()
    }
    fn capacity(&self) -> usize {
        self.inner.capacity()
    }
    fn area(&mut self) -> (std::ptr::NonNull<u8>, usize) {
        self.inner.area()
    }
    fn scratch(&mut self) -> std::ptr::NonNull<u8> {
        self.inner.scratch()
    }
    fn max_string_bytes(&self) -> u32 {
        self.inner.max_string_bytes()
    }
    fn reply(
        &mut self,
        status: idl::rt::Status,
        len: usize,
        strings: std::ops::Range<u32>,
    ) -> Result<(), CallError> {
        self.inner.reply(status, len, strings)
    }
}

/// One random interface: its IDL and its harness's entry points.
pub struct Case {
    /// The interface's name (and the IDL file's stem).
    pub name: &'static str,
    /// Where the build put its IDL file.
    pub idl_path: &'static str,
    /// Makes random calls on a client transport, checking each against
    /// what the server reports.
    pub drive: Drive,
    /// Serves the interface on a server transport until the client hangs
    /// up, answering with random values and reporting every call.
    pub serve: Serve,
    /// Serves the interface answering by the [`Answers`] rule (the
    /// differential test's Rust server).
    pub serve_answers: ServeAnswers,
    /// One call through the C and the Rust client stubs with the same
    /// values (the differential test's refusals).
    pub refusal: RefusalProbe,
}

include!(concat!(env!("OUT_DIR"), "/cases.rs"));
