//! The generated stubs over unet channels, to another host: a client end
//! and a server end over [`unet::Endpoint`]s, implementing the same traits
//! as the shared-memory channel, so the same stubs run unchanged.
//!
//! Nothing is shared between the hosts, so each message carries its
//! record and its strings (docs/idl.md, "The unet transport"):
//!
//! ```text
//! offset  size  what
//! 0       1     kind: 1 request, 2 reply, 3 close
//! 1       1     0
//! 2       2     word: request: the key; reply: the status
//! 4       4     len: bytes of the record
//! 8       4     seq: the call's number (the reply repeats it)
//! 12      4     strings_off: where the carried strings start in the string area
//! 16      4     strings_len: how many bytes of the string area are carried
//! 20      4     0
//! 24      len   the record, then zeros to a multiple of 8
//! ...           strings_len bytes: the string area from strings_off
//! ```
//!
//! A request carries the string area from 0 to the end of the last in
//! string; a reply carries the range its inout and out strings occupy
//! (their descriptors are offsets in the same area, so each side copies the
//! bytes to the same offsets of its own private area). Each side copies a
//! received message once into private memory and checks it there (the
//! header's fields against the message's length, the buffer's capacity and
//! the area), so the stubs then see the same checked [`crate::rt::Request`]
//! as over shared memory, and no memory the peer can write.
//!
//! Messages travel in order on a channel but may be lost on a real
//! network: the client discards a reply whose `seq` is not its call's and
//! gives up after its timeout.

use std::ops::Range;
use std::ptr::NonNull;
use std::time::{Duration, Instant};

use unet::{Addr, Endpoint, Engine};

use super::{CallError, ClientTransport, ServerTransport, Status};
use crate::model::Limits;

/// Bytes of a message's header.
pub const HEADER: usize = 24;
/// `kind` of a request.
pub const REQUEST: u8 = 1;
/// `kind` of a reply.
pub const REPLY: u8 = 2;
/// `kind` of the client's goodbye: the server loop ends.
pub const CLOSE: u8 = 3;

/// The sizes and limits of a unet channel's ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Bytes of the message buffer: the largest record (at most 65535).
    pub capacity: usize,
    /// Bytes of the string area. A message (header, record, strings) must
    /// fit the endpoint's largest message.
    pub area: usize,
    /// Strings per message and bytes per string.
    pub limits: Limits,
}

impl Default for Config {
    fn default() -> Self {
        let limits = Limits::default();
        Config {
            capacity: limits.max_record as usize,
            area: 48 << 10,
            limits,
        }
    }
}

/// Why a unet channel's end could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The configuration does not fit the endpoint.
    #[error("bad unet channel configuration: {0}")]
    Config(String),
    /// The engine refused (an endpoint, a channel).
    #[error("unet engine: {0}")]
    Engine(#[from] unet::EngineError),
    /// The transport refused (an address).
    #[error("unet transport: {0}")]
    Transport(#[from] unet::transport::TransportError),
}

fn check(config: &Config, ep: &Endpoint) -> Result<(), SetupError> {
    if config.capacity > u16::MAX as usize || config.area > u32::MAX as usize {
        return Err(SetupError::Config(
            "capacity above 65535 or area above 4 GiB".into(),
        ));
    }
    let need = HEADER + config.capacity.next_multiple_of(8) + config.area;
    if need > ep.max_message() {
        return Err(SetupError::Config(format!(
            "a message of {need} bytes (header, record, string area) exceeds the endpoint's largest, {}",
            ep.max_message()
        )));
    }
    Ok(())
}

/// An 8-aligned private buffer of at least `n` bytes.
fn words(n: usize) -> Vec<u64> {
    vec![0u64; n.div_ceil(8).max(1)]
}

fn bytes(v: &[u64]) -> &[u8] {
    // SAFETY: a `u64` slice is readable as its bytes; all initialized.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), v.len() * 8) }
}

fn bytes_mut(v: &mut [u64]) -> &mut [u8] {
    // SAFETY: as for `bytes`; any bytes are valid `u64`s.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), v.len() * 8) }
}

/// A message header.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Head {
    kind: u8,
    word: u16,
    len: u32,
    seq: u32,
    strings: Range<u32>,
}

impl Head {
    fn write(&self, b: &mut [u8]) {
        b[0] = self.kind;
        b[1] = 0;
        b[2..4].copy_from_slice(&self.word.to_le_bytes());
        b[4..8].copy_from_slice(&self.len.to_le_bytes());
        b[8..12].copy_from_slice(&self.seq.to_le_bytes());
        b[12..16].copy_from_slice(&self.strings.start.to_le_bytes());
        b[16..20].copy_from_slice(&(self.strings.end - self.strings.start).to_le_bytes());
        b[20..24].fill(0);
    }

    /// The header of a received message, checked against its length, the
    /// record capacity and the area; `None` if it does not hold.
    fn read(b: &[u8], cap: usize, area: usize) -> Option<Head> {
        let u32_at = |i: usize| Some(u32::from_le_bytes(b.get(i..i + 4)?.try_into().ok()?));
        let len = u32_at(4)?;
        let (off, n) = (u32_at(12)?, u32_at(16)?);
        let h = Head {
            kind: b[0],
            word: u16::from_le_bytes([b[2], b[3]]),
            len,
            seq: u32_at(8)?,
            strings: off..off.checked_add(n)?,
        };
        let total = HEADER as u64 + u64::from(len).next_multiple_of(8) + u64::from(n);
        (total == b.len() as u64 && len as usize <= cap && h.strings.end as usize <= area)
            .then_some(h)
    }
}

/// Builds a message: header, `rec`, padding, `strings`.
fn frame(h: &Head, rec: &[u8], strings: &[u8], out: &mut [u8]) {
    h.write(&mut out[..HEADER]);
    let pad = rec.len().next_multiple_of(8);
    out[HEADER..HEADER + rec.len()].copy_from_slice(rec);
    out[HEADER + rec.len()..HEADER + pad].fill(0);
    out[HEADER + pad..].copy_from_slice(strings);
}

fn send(
    ep: &mut Endpoint,
    chan: u16,
    h: &Head,
    rec: &[u8],
    strings: &[u8],
) -> Result<(), CallError> {
    let total = HEADER + rec.len().next_multiple_of(8) + strings.len();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match ep.send_with(chan, total, |out| frame(h, rec, strings, out)) {
            Ok(()) => return Ok(()),
            Err(unet::SendError::Full) if Instant::now() < deadline => std::thread::yield_now(),
            Err(e) => return Err(CallError::Io(std::io::Error::other(e))),
        }
    }
}

/// Waits with growing pauses: spins, then yields, then sleeps up to 1 ms.
struct Backoff(u32);

impl Backoff {
    fn pause(&mut self) {
        self.0 = self.0.saturating_add(1);
        match self.0 {
            0..64 => std::hint::spin_loop(),
            64..256 => std::thread::yield_now(),
            n => std::thread::sleep(Duration::from_micros(u64::from(n.min(1000)))),
        }
    }
}

/// The client's end of a unet channel: a [`ClientTransport`]. Dropping it
/// tells the server (a close message).
pub struct ClientEnd {
    ep: Endpoint,
    chan: u16,
    config: Config,
    msg: Vec<u64>,
    area: Vec<u64>,
    rx: Vec<u8>,
    used: usize,
    count: u32,
    seq: u32,
    timeout: Option<Duration>,
    closed: bool,
}

impl ClientEnd {
    /// A client over `ep`, calling the server at the other end of its
    /// channel `chan`.
    pub fn new(ep: Endpoint, chan: u16, config: &Config) -> Result<ClientEnd, SetupError> {
        check(config, &ep)?;
        Ok(ClientEnd {
            ep,
            chan,
            config: *config,
            msg: words(config.capacity),
            area: words(config.area),
            rx: Vec::new(),
            used: 0,
            count: 0,
            seq: 0,
            timeout: None,
            closed: false,
        })
    }

    /// Sets how long a call waits for its reply (`None`: for ever).
    pub fn set_timeout(&mut self, timeout: Option<Duration>) {
        self.timeout = timeout;
    }

    /// The endpoint (e.g. to send raw messages on [`ClientEnd::chan`]).
    pub fn endpoint(&mut self) -> &mut Endpoint {
        &mut self.ep
    }

    /// The channel the calls go out on.
    pub fn chan(&self) -> u16 {
        self.chan
    }

    /// Tells the server loop to end; later calls fail with
    /// [`CallError::Closed`].
    pub fn close(&mut self) {
        if !self.closed {
            self.closed = true;
            let h = Head {
                kind: CLOSE,
                word: 0,
                len: 0,
                seq: self.seq,
                strings: 0..0,
            };
            let _ = send(&mut self.ep, self.chan, &h, &[], &[]);
            self.ep.flush(1000);
        }
    }

    /// Takes the reply to call `seq` from a received message, if it is one.
    fn take(&mut self, seq: u32) -> Option<Result<usize, CallError>> {
        let m = self.ep.recv()?;
        self.rx.clear();
        m.read(|p| self.rx.extend_from_slice(p));
        drop(m);
        let cap = self.config.capacity;
        let Some(h) = Head::read(&self.rx, cap, self.config.area) else {
            return Some(Err(CallError::Malformed(
                "a reply's header does not match its length",
            )));
        };
        if h.kind != REPLY || h.seq != seq {
            return None; // a late reply to an earlier call: not ours
        }
        match Status::from_wire(h.word) {
            Some(Status::Ok) => {}
            Some(s) => return Some(Err(CallError::Status(s))),
            None => return Some(Err(CallError::Malformed("unknown status word"))),
        }
        let len = h.len as usize;
        bytes_mut(&mut self.msg)[..len].copy_from_slice(&self.rx[HEADER..HEADER + len]);
        let at = HEADER + len.next_multiple_of(8);
        let s = h.strings.start as usize..h.strings.end as usize;
        bytes_mut(&mut self.area)[s].copy_from_slice(&self.rx[at..]);
        Some(Ok(len))
    }
}

impl Drop for ClientEnd {
    fn drop(&mut self) {
        self.close();
    }
}

// SAFETY: `buf` is this end's private `Vec<u64>` of at least `capacity`
// bytes (8-aligned), used by nothing else; `call` returns only lengths
// `<= capacity` (`Head::read` checked); `reply_bytes` returns slices of
// the private area (8-aligned), checked to lie in it.
unsafe impl ClientTransport for ClientEnd {
    fn buf(&mut self) -> NonNull<u8> {
        NonNull::from(&mut self.msg[..]).cast::<u8>()
    }

    fn capacity(&self) -> usize {
        self.config.capacity
    }

    fn begin(&mut self) {
        self.used = 0;
        self.count = 0;
    }

    fn put(&mut self, b: &[u8], align: usize) -> Result<u32, CallError> {
        let l = &self.config.limits;
        if b.len() > l.max_string_bytes as usize {
            return Err(CallError::StringTooLong {
                len: b.len(),
                max: l.max_string_bytes,
            });
        }
        if self.count >= l.max_strings {
            return Err(CallError::TooManyStrings { max: l.max_strings });
        }
        let at = self.used.next_multiple_of(align.max(1));
        let size = self.config.area;
        if at > size || b.len() > size - at {
            return Err(CallError::AreaFull {
                len: b.len(),
                at,
                size,
            });
        }
        bytes_mut(&mut self.area)[at..at + b.len()].copy_from_slice(b);
        self.used = at + b.len();
        self.count += 1;
        Ok(at as u32)
    }

    fn call(&mut self, key: u16, len: usize) -> Result<usize, CallError> {
        if self.closed {
            return Err(CallError::Closed);
        }
        if len > self.config.capacity {
            return Err(CallError::RecordTooLarge {
                size: len,
                capacity: self.config.capacity,
            });
        }
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let h = Head {
            kind: REQUEST,
            word: key,
            len: len as u32,
            seq,
            strings: 0..self.used as u32,
        };
        let (msg, area) = (bytes(&self.msg), bytes(&self.area));
        send(&mut self.ep, self.chan, &h, &msg[..len], &area[..self.used])?;
        let deadline = self.timeout.map(|t| Instant::now() + t);
        let mut backoff = Backoff(0);
        loop {
            if let Some(r) = self.take(seq) {
                return r;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(CallError::Timeout);
            }
            backoff.pause();
        }
    }

    fn reply_bytes(&self, off: u32, len: usize) -> Result<&[u8], CallError> {
        let (off, size) = (off as usize, self.config.area);
        if len > self.config.limits.max_string_bytes as usize || off > size || len > size - off {
            return Err(CallError::Malformed(
                "a reply's descriptor lies outside the string area",
            ));
        }
        Ok(&bytes(&self.area)[off..off + len])
    }
}

/// The server's end of a unet channel: a [`ServerTransport`] answering
/// whoever calls its endpoint, on the channel each request came on.
pub struct ServerEnd {
    ep: Endpoint,
    config: Config,
    msg: Vec<u64>,
    area: Vec<u64>,
    scratch: Vec<u8>,
    rx: Vec<u8>,
    /// The channel and call number of the request being served.
    chan: u16,
    seq: u32,
}

impl ServerEnd {
    /// A server over `ep`.
    pub fn new(ep: Endpoint, config: &Config) -> Result<ServerEnd, SetupError> {
        check(config, &ep)?;
        Ok(ServerEnd {
            ep,
            config: *config,
            msg: words(config.capacity),
            area: words(config.area),
            scratch: vec![0; config.area],
            rx: Vec::new(),
            chan: 0,
            seq: 0,
        })
    }

    /// Sends a reply with no record or strings (a refusal).
    fn refuse(&mut self, chan: u16, seq: u32, status: Status) -> Result<(), CallError> {
        let h = Head {
            kind: REPLY,
            word: status as u16,
            len: 0,
            seq,
            strings: 0..0,
        };
        send(&mut self.ep, chan, &h, &[], &[])
    }
}

// SAFETY: the buffer, area and scratch are this end's private `Vec`s
// (buffer and area 8-aligned, `u64`), disjoint, of at least `capacity`,
// `area` and `area` bytes; `wait` returns only lengths `<= capacity`
// (`Head::read` checked); nothing else touches them until `reply`.
unsafe impl ServerTransport for ServerEnd {
    fn wait(&mut self) -> Result<(u16, usize), CallError> {
        let mut backoff = Backoff(0);
        loop {
            let Some(m) = self.ep.recv() else {
                backoff.pause();
                continue;
            };
            backoff = Backoff(0);
            let chan = m.chan();
            self.rx.clear();
            m.read(|p| self.rx.extend_from_slice(p));
            drop(m);
            let Some(h) = Head::read(&self.rx, self.config.capacity, self.config.area) else {
                // Not a well-formed message: answer if it names a call.
                if self.rx.len() >= 12 && self.rx[0] == REQUEST {
                    let seq =
                        u32::from_le_bytes([self.rx[8], self.rx[9], self.rx[10], self.rx[11]]);
                    self.refuse(chan, seq, Status::ShortMessage)?;
                }
                continue;
            };
            match h.kind {
                REQUEST => {}
                CLOSE => return Err(CallError::Closed),
                _ => continue,
            }
            let len = h.len as usize;
            bytes_mut(&mut self.msg)[..len].copy_from_slice(&self.rx[HEADER..HEADER + len]);
            let at = HEADER + len.next_multiple_of(8);
            let s = h.strings.start as usize..h.strings.end as usize;
            bytes_mut(&mut self.area)[s].copy_from_slice(&self.rx[at..]);
            (self.chan, self.seq) = (chan, h.seq);
            return Ok((h.word, len));
        }
    }

    fn buf(&mut self) -> NonNull<u8> {
        NonNull::from(&mut self.msg[..]).cast::<u8>()
    }

    fn capacity(&self) -> usize {
        self.config.capacity
    }

    fn area(&mut self) -> (NonNull<u8>, usize) {
        (
            NonNull::from(&mut self.area[..]).cast::<u8>(),
            self.config.area,
        )
    }

    fn scratch(&mut self) -> NonNull<u8> {
        NonNull::from(&mut self.scratch[..]).cast::<u8>()
    }

    fn max_string_bytes(&self) -> u32 {
        self.config.limits.max_string_bytes
    }

    fn reply(&mut self, status: Status, len: usize, strings: Range<u32>) -> Result<(), CallError> {
        let (chan, seq) = (self.chan, self.seq);
        if status != Status::Ok {
            return self.refuse(chan, seq, status);
        }
        let len = len.min(self.config.capacity);
        let s =
            strings.start.min(strings.end) as usize..(strings.end as usize).min(self.config.area);
        let strings = s.start as u32..s.end.max(s.start) as u32;
        let h = Head {
            kind: REPLY,
            word: Status::Ok as u16,
            len: len as u32,
            seq,
            strings: strings.clone(),
        };
        let (msg, area) = (bytes(&self.msg), bytes(&self.area));
        send(
            &mut self.ep,
            chan,
            &h,
            &msg[..len],
            &area[strings.start as usize..strings.end as usize],
        )
    }
}

/// A client and a server end on two engines joined by an in-process loop
/// network (two "hosts", 10.0.0.1 and 10.0.0.2), for tests and examples.
pub fn loop_pair(config: &Config) -> Result<(ClientEnd, ServerEnd), SetupError> {
    let net = unet::transport::LoopNet::new();
    let (ca, sa): (Addr, Addr) = (
        "10.0.0.1:7000"
            .parse()
            .map_err(|_| SetupError::Config("address".into()))?,
        "10.0.0.2:7000"
            .parse()
            .map_err(|_| SetupError::Config("address".into()))?,
    );
    let ce = Engine::new(Box::new(net.attach(ca)?));
    let se = Engine::new(Box::new(net.attach(sa)?));
    let ep_config = unet::Config {
        buffer_size: 16384,
        ..unet::Config::default()
    };
    let mut c = ce.create_endpoint(ep_config, None)?;
    let mut s = se.create_endpoint(ep_config, None)?;
    let chan = c.open_channel(sa, s.id())?;
    s.open_channel(ca, c.id())?;
    Ok((ClientEnd::new(c, chan, config)?, ServerEnd::new(s, config)?))
}
