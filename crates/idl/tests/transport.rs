//! The channels' protocol and the server's trust model: closing wakes the
//! peer, the spin-then-sleep path sets the waiter bit, a late reply times
//! out, bad headers are rejected; and hostile clients that write random
//! keys, lengths, records and descriptors (also while the server reads
//! them) get an error status or a correct reply, and never stop the server.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use idl::rt::shm::{self, ClientEnd, Config, ServerEnd, ShmError};
use idl::rt::{CallError, ClientTransport, Desc, OutSeq, OutStr, ServerTransport, Status};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[allow(dead_code)]
mod gen_every {
    include!("idl/every.rs");
}

use gen_every::{Pair, Point, every};

// ------------------------------------------------------------ raw access

/// A second mapping of a channel's `memfd`, to play a peer that ignores
/// the protocol.
struct Raw {
    p: *mut u8,
    len: usize,
}

// SAFETY: the mapping is only accessed through atomics and volatile
// writes, from any thread.
unsafe impl Send for Raw {}
// SAFETY: as for `Send`.
unsafe impl Sync for Raw {}

impl Raw {
    fn new(fd: &OwnedFd) -> Raw {
        let len = std::fs::File::from(fd.try_clone().expect("dup"))
            .metadata()
            .expect("fstat")
            .len() as usize;
        // SAFETY: a fresh shared mapping of the whole file; the kernel
        // picks the address.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED, "mmap");
        Raw { p: p.cast(), len }
    }

    fn state(&self) -> &AtomicU32 {
        // SAFETY: offset 4096 is in the mapping and 4-aligned.
        unsafe { &*self.p.add(shm::LINE).cast::<AtomicU32>() }
    }

    fn word(&self, off: usize) -> &AtomicU16 {
        // SAFETY: offsets 4100 and 4102 are in the mapping and 2-aligned.
        unsafe { &*self.p.add(shm::LINE + off).cast::<AtomicU16>() }
    }

    /// Writes `v` at `off` (past the descriptor line's words).
    fn scribble(&self, off: usize, v: u8) {
        assert!(off >= shm::MSG && off < self.len);
        // SAFETY: in the mapping (asserted); a byte store.
        unsafe { self.p.add(off).write_volatile(v) }
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        // SAFETY: unmaps the mapping made in `new`.
        unsafe { libc::munmap(self.p.cast(), self.len) };
    }
}

fn futex_wake(w: &AtomicU32) {
    // SAFETY: FUTEX_WAKE on a valid aligned word.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            w.as_ptr(),
            libc::FUTEX_WAKE,
            i32::MAX,
            0usize,
            0usize,
            0u32,
        )
    };
}

/// Runs `f` on a thread; its result, or a panic if it takes over 20 s.
fn within<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(20))
        .expect("finished in time")
}

// ------------------------------------------------------------ protocol

#[test]
fn closing_the_client_wakes_a_sleeping_server() {
    let (c, mut s) = shm::pair(&Config {
        spin: 0,
        area: 4096,
        ..Config::default()
    })
    .expect("channel");
    let raw = Raw::new(s.fd());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(s.wait().map(|_| ()));
    });
    // The server goes to sleep on the futex, with the waiter bit set.
    let mut slept = false;
    for _ in 0..2000 {
        if raw.state().load(Ordering::Acquire) & shm::WAITER != 0 {
            slept = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(slept, "the server never set the waiter bit");
    drop(c);
    let r = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the server woke");
    assert!(matches!(r, Err(CallError::Closed)), "{r:?}");
    assert_eq!(
        raw.state().load(Ordering::Acquire) & !shm::WAITER,
        shm::CLOSED
    );
}

#[test]
fn closing_the_server_wakes_a_waiting_client() {
    let (mut c, mut s) = shm::pair(&Config {
        spin: 0,
        area: 4096,
        ..Config::default()
    })
    .expect("channel");
    std::thread::spawn(move || {
        let _ = s.wait();
        std::thread::sleep(Duration::from_millis(50));
        drop(s); // without replying
    });
    let r = within(move || c.call_raw(7, &[1, 2, 3]).map(<[u8]>::to_vec));
    assert!(matches!(r, Err(CallError::Closed)), "{r:?}");
}

/// A server that answers and then goes away at once (a one-shot server,
/// a server process that exits after its last reply) must not take its
/// answer with it: the client still gets the reply it was waiting for, and
/// only its next call finds the channel closed. The client sleeps on the
/// futex (`spin: 0`), so the server's close lands before the client reads
/// the state: without the `REPLY_CLOSED` bit the close replaced the reply.
#[test]
fn a_reply_posted_just_before_the_server_closes_reaches_the_client() {
    for round in 0..50u8 {
        let (mut c, mut s) = shm::pair(&Config {
            spin: 0,
            area: 4096,
            ..Config::default()
        })
        .expect("channel");
        std::thread::spawn(move || {
            let (key, len) = s.wait().expect("the request");
            // SAFETY: the message buffer holds `capacity >= len` bytes,
            // ours until `reply`.
            let buf = unsafe { std::slice::from_raw_parts_mut(s.buf().as_ptr(), len) };
            buf[0] = buf[0].wrapping_add(key as u8);
            s.reply(Status::Ok, len, 0..0).expect("the reply posts");
            drop(s); // closes the channel, the client not yet awake
        });
        let r = within(move || {
            let first = c.call_raw(7, &[round, 2, 3]).map(<[u8]>::to_vec);
            let second = c.call_raw(7, &[round]).map(<[u8]>::to_vec);
            (first, second)
        });
        match r {
            (Ok(rec), Err(CallError::Closed)) => assert_eq!(rec, [round + 7, 2, 3]),
            (first, second) => panic!(
                "round {round}: the reply before the close: {}; the call after it: {}",
                first.map_or_else(|e| e.to_string(), |r| format!("{} bytes", r.len())),
                second.map_or_else(|e| e.to_string(), |r| format!("{} bytes", r.len()))
            ),
        }
    }
}

#[test]
fn a_late_reply_times_out_and_closes() {
    let (mut c, mut s) = shm::pair(&Config {
        area: 4096,
        ..Config::default()
    })
    .expect("channel");
    c.set_timeout(Some(Duration::from_millis(100)));
    let server = std::thread::spawn(move || {
        let _ = s.wait();
        std::thread::sleep(Duration::from_millis(300));
        s.reply(Status::Ok, 0, 0..0)
    });
    assert!(matches!(c.call_raw(1, &[]), Err(CallError::Timeout)));
    assert!(matches!(c.call_raw(1, &[]), Err(CallError::Closed)));
    assert!(matches!(
        server.join().expect("server"),
        Err(CallError::Closed)
    ));
}

#[test]
fn spin_then_sleep_both_ways() {
    for spin in [0, 1, 50, 100_000] {
        let (mut c, mut s) = shm::pair(&Config {
            spin,
            area: 4096,
            ..Config::default()
        })
        .expect("channel");
        let server = std::thread::spawn(move || {
            s.serve_raw(|key, buf, len| {
                if len > 0 {
                    buf[0] ^= key as u8;
                }
                len
            })
        });
        for k in 0..300u16 {
            if k % 100 == 0 {
                std::thread::sleep(Duration::from_millis(5)); // let the server fall asleep
            }
            let r = c.call_raw(k, &[0xff, k as u8]).expect("call");
            assert_eq!(r, &[0xff ^ k as u8, k as u8]);
        }
        drop(c);
        within(move || server.join().expect("server").expect("ends cleanly"));
    }
}

#[test]
fn an_oversized_length_is_a_short_message() {
    let (c, mut s) = shm::pair(&Config {
        area: 4096,
        ..Config::default()
    })
    .expect("channel");
    let raw = Raw::new(s.fd());
    let server = std::thread::spawn(move || every::serve(&mut Pure, &mut s));
    raw.word(4).store(every::NULL, Ordering::Relaxed);
    raw.word(6).store(u16::MAX, Ordering::Relaxed); // over the 4096-byte buffer
    let old = raw.state().swap(shm::REQUEST, Ordering::Release);
    if old & shm::WAITER != 0 {
        futex_wake(raw.state());
    }
    let st = within(move || {
        while raw.state().load(Ordering::Acquire) & !shm::WAITER != shm::REPLY {
            std::thread::yield_now();
        }
        raw.word(4).load(Ordering::Relaxed)
    });
    assert_eq!(Status::from_wire(st), Some(Status::ShortMessage));
    drop(c);
    within(move || server.join().expect("server").expect("ends cleanly"));
}

/// A channel's `memfd` with its header bytes at `at` replaced by `bytes`.
fn patched(at: u64, bytes: &[u8]) -> OwnedFd {
    let fd = shm::create(&Config {
        area: 4096,
        ..Config::default()
    })
    .expect("create");
    let file = std::fs::File::from(fd.try_clone().expect("dup"));
    std::os::unix::fs::FileExt::write_all_at(&file, bytes, at).expect("patch");
    fd
}

#[test]
fn bad_headers_are_rejected() {
    let bad = |fd: OwnedFd| match ClientEnd::from_fd(fd) {
        Err(ShmError::BadHeader(why)) => why,
        other => panic!("accepted a bad header: {other:?}"),
    };
    assert_eq!(bad(patched(0, b"fpidl\0\0\x02")), "wrong magic");
    assert_eq!(bad(patched(8, &2u32.to_ne_bytes())), "unknown version");
    assert_eq!(
        bad(patched(12, &10u32.to_ne_bytes())),
        "message capacity out of range"
    );
    assert_eq!(
        bad(patched(12, &70000u32.to_ne_bytes())),
        "message capacity out of range"
    );
    assert_eq!(
        bad(patched(16, &4096u32.to_ne_bytes())),
        "the string area overlaps the message buffer"
    );
    assert_eq!(
        bad(patched(16, &12289u32.to_ne_bytes())),
        "the string area overlaps the message buffer"
    );
    assert_eq!(
        bad(patched(20, &(1u32 << 30).to_ne_bytes())),
        "the string area exceeds the file"
    );
    assert_eq!(bad(patched(24, &0u32.to_ne_bytes())), "max_strings is 0");
    assert!(matches!(
        ServerEnd::from_fd(patched(0, b"xxxxxxxx")),
        Err(ShmError::BadHeader("wrong magic"))
    ));

    // A memfd that is not sealed, and one too short for a header.
    let name = std::ffi::CString::new("unsealed").expect("name");
    // SAFETY: a valid name and flags.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    assert!(fd >= 0);
    // SAFETY: a descriptor just made, owned by no one else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    std::fs::File::from(fd.try_clone().expect("dup"))
        .set_len(1 << 16)
        .expect("size");
    assert!(matches!(ClientEnd::from_fd(fd), Err(ShmError::NotSealed)));

    // SAFETY: reads a variable that does not name a descriptor.
    let r = unsafe { shm::fd_from_env("IDL_TEST_NO_SUCH_VARIABLE") };
    assert!(matches!(r, Err(ShmError::NoFd(_))));
    assert!(matches!(
        shm::create(&Config {
            capacity: 10,
            ..Config::default()
        }),
        Err(ShmError::Config(_))
    ));
}

/// The channel's segment is unet's (`unet::shm::Segment`: memfd creation,
/// sealing and mapping in one place): a segment unet makes, given a
/// channel's header, is a channel both ends map, with the seals a channel
/// has; and `rt::shm` makes no memfd, seal or mapping of its own.
#[test]
fn the_channel_segment_is_unets() {
    let cfg = Config {
        area: 4096,
        ..Config::default()
    };
    let fd = shm::create(&cfg).expect("channel");
    let file = std::fs::File::from(fd.try_clone().expect("dup"));
    let len = file.metadata().expect("fstat").len() as usize;
    let mut header = [0u8; 64];
    std::os::unix::fs::FileExt::read_exact_at(&file, &mut header, 0).expect("header");
    let seg = unet::shm::Segment::create("idl-test", len).expect("unet segment");
    seg.write_bytes(0, &header);
    let seals = |fd: &OwnedFd| {
        // SAFETY: F_GET_SEALS on a valid descriptor reads its seals.
        unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) }
    };
    assert_eq!(seals(seg.fd()), seals(&fd), "a channel's seals are unet's");
    let (mut c, mut s) = (
        ClientEnd::from_fd(seg.fd().try_clone().expect("dup")).expect("client end"),
        ServerEnd::from_fd(seg.fd().try_clone().expect("dup")).expect("server end"),
    );
    let t = std::thread::spawn(move || {
        s.serve_raw(|key, buf, len| {
            buf[0] ^= key as u8;
            len
        })
    });
    assert_eq!(c.call_raw(3, &[1, 2]).expect("call"), &[2, 2]);
    drop(c);
    within(move || t.join().expect("server").expect("ends cleanly"));

    let src = include_str!("../src/rt/shm.rs");
    for own in ["memfd_create", "F_ADD_SEALS", "libc::mmap", "libc::munmap"] {
        assert!(
            !src.contains(own),
            "rt/shm.rs calls {own} itself instead of going through unet::shm::Segment"
        );
    }
}

/// This thread's CPU time.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes the calling thread's CPU clock into `ts`.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(r, 0, "clock_gettime");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The Rust run time's waiting policy: a client whose server takes 20 ms
/// per call polls at most about `SPIN_TIME` per call before it sleeps,
/// whatever the channel's spin count allows (here the most, 2^20 polls,
/// which a fixed-count rule spends in full, about 20 ms of CPU per call).
/// The C run time's twin is `c_liveness`'s
/// `a_c_client_stops_polling_a_server_that_does_not_answer_soon`.
#[test]
fn a_rust_client_stops_polling_a_server_that_does_not_answer_soon() {
    const CALLS: u32 = 20;
    const WORK: Duration = Duration::from_millis(20);
    let (mut c, mut s) = shm::pair(&Config {
        spin: 1 << 20,
        area: 4096,
        ..Config::default()
    })
    .expect("channel");
    let server = std::thread::spawn(move || {
        s.serve_raw(|_, _, len| {
            std::thread::sleep(WORK);
            len
        })
    });
    let cpu = within(move || {
        let t = thread_cpu();
        for _ in 0..CALLS {
            c.call_raw(2, &[]).expect("call");
        }
        thread_cpu() - t
    });
    within(move || server.join().expect("server").expect("ends cleanly"));
    eprintln!(
        "Rust client: {} us of CPU over {CALLS} calls of {} ms each",
        cpu.as_micros(),
        WORK.as_millis()
    );
    // Polling the whole wait would be CALLS * WORK = 400 ms of CPU; the
    // policy's polls are 20 * 10 us. The bound leaves room for the system
    // calls and a loaded machine's scheduling.
    assert!(
        cpu < Duration::from_millis(100),
        "the Rust client spent {} us of CPU waiting: it polled instead of sleeping",
        cpu.as_micros()
    );
}

// ------------------------------------------------------------ hostile clients

/// A server of every kind of parameter whose results depend only on the
/// arguments.
struct Pure;

impl every::Server for Pure {
    fn null(&mut self) {}

    fn ints(
        &mut self,
        a: i8,
        b: u8,
        c: i16,
        d: u16,
        e: i32,
        f: u32,
        g: i64,
        h: u64,
        ia: &mut i8,
        id: &mut u16,
        ig: &mut i64,
        ob: &mut u8,
        of: &mut u32,
        oh: &mut u64,
    ) -> i64 {
        *ia = ia.wrapping_add(a);
        *id ^= d;
        *ig = ig.wrapping_sub(g);
        *ob = b ^ 0x5a;
        *of = f ^ e as u32;
        *oh = h.wrapping_add(c as u64);
        (a as i64).wrapping_add(g).wrapping_add(h as i64)
    }

    fn flags(&mut self, a: bool, b: &mut bool, c: &mut bool) -> bool {
        *c = a ^ *b;
        *b = !*b;
        a && *c
    }

    fn structs(&mut self, p: Point, q: &mut Pair, r: &mut Point) -> Point {
        *r = Point {
            x: p.y as i16,
            y: p.x as i32,
            ..p
        };
        q.a = q.a.wrapping_add(p.y as i64);
        q.p
    }

    fn arrays(&mut self, a: [i32; 4], b: &mut [i16; 3], c: &mut [u8; 5], ps: [Point; 2]) {
        for (x, y) in b.iter_mut().zip(a) {
            *x = x.wrapping_add(y as i16);
        }
        *c = [a[0] as u8, ps[0].tag, ps[1].tag, 1, 2];
    }

    fn chars(&mut self, c: u8, d: &mut u8) -> u8 {
        *d = d.wrapping_add(c);
        c ^ 0x20
    }

    fn strings(&mut self, s: &str, io: &mut OutStr<'_>, o: &mut OutStr<'_>) -> i32 {
        let _ = io.push_str(s);
        let _ = o.push_str(&s.to_uppercase());
        s.len() as i32
    }

    fn seqs(
        &mut self,
        a: &[i32],
        b: &mut [i16],
        c: &mut OutSeq<'_, u64>,
        ps: &[Point],
        bytes: &mut OutSeq<'_, u8>,
    ) {
        for x in b.iter_mut() {
            *x = x.wrapping_mul(2);
        }
        for &x in a {
            let _ = c.push(x as u64);
        }
        for p in ps {
            let _ = bytes.push(p.tag);
        }
    }

    fn sized(&mut self, in_data: &[i16], buf: &mut [u8], out_data: &mut OutSeq<'_, i64>) -> u32 {
        buf.reverse();
        for &x in in_data {
            let _ = out_data.push(x as i64);
        }
        (in_data.len() + buf.len()) as u32
    }

    fn corba(
        &mut self,
        x: i32,
        name: &mut OutStr<'_>,
        pts: &mut OutSeq<'_, Point>,
        ok: &mut bool,
        blob: &[u8],
    ) {
        let _ = name.push_str("!");
        for &b in blob {
            let _ = pts.push(Point {
                tag: b,
                ..Default::default()
            });
        }
        *ok = x % 2 == 0;
    }

    fn fail(&mut self, x: i32) -> i32 {
        assert!(x >= 0, "negative: a deliberate panic");
        x.wrapping_mul(2)
    }
}

fn quiet_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let old = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info.to_string().contains("deliberate") {
                old(info);
            }
        }));
    });
}

/// A message record as `M`, from the bytes the client wrote.
fn as_msg<M: Copy>(rec: &[u8]) -> M {
    assert!(rec.len() >= size_of::<M>());
    // SAFETY: `rec` holds `size_of::<M>()` bytes (asserted); the records
    // are plain data valid for any bits; an unaligned read copies them.
    unsafe { rec.as_ptr().cast::<M>().read_unaligned() }
}

/// The server's descriptor rules, restated: the byte range, or None.
fn desc_ok(
    d: Desc,
    size: usize,
    align: usize,
    next: &mut usize,
    area: usize,
    max: usize,
) -> Option<(usize, usize)> {
    let (off, n) = (d.off as usize, d.len as usize * size);
    if n > max || off % align != 0 || off < *next || off > area || n > area - off {
        return None;
    }
    *next = off + n;
    Some((off, n))
}

fn request_size(key: u16) -> usize {
    use idl::rt::Message;
    match key {
        every::NULL => every::NullMsg::REQUEST_SIZE,
        every::INTS => every::IntsMsg::REQUEST_SIZE,
        every::FLAGS => every::FlagsMsg::REQUEST_SIZE,
        every::STRUCTS => every::StructsMsg::REQUEST_SIZE,
        every::ARRAYS => every::ArraysMsg::REQUEST_SIZE,
        every::CHARS => every::CharsMsg::REQUEST_SIZE,
        every::STRINGS => every::StringsMsg::REQUEST_SIZE,
        every::SEQS => every::SeqsMsg::REQUEST_SIZE,
        every::SIZED => every::SizedMsg::REQUEST_SIZE,
        every::CORBA => every::CorbaMsg::REQUEST_SIZE,
        _ => every::FailMsg::REQUEST_SIZE,
    }
}

/// What the server must answer to `rec` (the request's first bytes) with
/// the string area `area`: a status, or, for an `Ok`, a check of the reply
/// (its record and the client's view of the area).
fn expect(
    key: u16,
    rec: &[u8],
    len: usize,
    area: &[u8],
    max: usize,
    reply: Result<&[u8], Status>,
    c: &ClientEnd,
) {
    use every::Server as _;
    let a = area.len();
    let bool_of = |b: u8| match b {
        0 => Some(false),
        1 => Some(true),
        _ => None,
    };
    if key > every::FAIL {
        assert_eq!(reply.err(), Some(Status::BadKey));
        return;
    }
    if len < request_size(key) {
        assert_eq!(
            reply.err(),
            Some(Status::ShortMessage),
            "key {key} len {len}"
        );
        return;
    }
    let got = |what: &str| match reply {
        Ok(r) => r,
        Err(s) => panic!("key {key}: {what}: got {s:?}"),
    };
    let fetch = |d: Desc, size: usize| -> Vec<u8> {
        c.reply_bytes(d.off, d.len as usize * size)
            .expect("out descriptor in the area")
            .to_vec()
    };
    match key {
        every::NULL => assert_eq!(got("null").len(), 0),
        every::INTS => {
            let m: every::IntsMsg = as_msg(rec);
            let r: every::IntsMsg = as_msg(got("ints"));
            let (mut ia, mut id, mut ig, mut ob, mut of, mut oh) = (m.ia, m.id, m.ig, 0, 0, 0);
            let ret = Pure.ints(
                m.a, m.b, m.c, m.d, m.e, m.f, m.g, m.h, &mut ia, &mut id, &mut ig, &mut ob,
                &mut of, &mut oh,
            );
            assert_eq!(
                (r.ret, r.ia, r.id, r.ig, r.ob, r.of, r.oh),
                (ret, ia, id, ig, ob, of, oh)
            );
        }
        every::FLAGS => {
            let m: every::FlagsMsg = as_msg(rec);
            let (Some(x), Some(mut b)) = (bool_of(m.a), bool_of(m.b)) else {
                assert_eq!(reply.err(), Some(Status::BadValue));
                return;
            };
            let r: every::FlagsMsg = as_msg(got("flags"));
            let mut cc = false;
            let ret = Pure.flags(x, &mut b, &mut cc);
            assert_eq!((r.ret, r.b, r.c), (ret as u8, b as u8, cc as u8));
        }
        every::STRUCTS => {
            let m: every::StructsMsg = as_msg(rec);
            let r: every::StructsMsg = as_msg(got("structs"));
            let (mut q, mut rr) = (m.q, Point::default());
            let ret = Pure.structs(m.p, &mut q, &mut rr);
            assert_eq!((r.ret, r.q, r.r), (ret, q, rr));
        }
        every::ARRAYS => {
            let m: every::ArraysMsg = as_msg(rec);
            let r: every::ArraysMsg = as_msg(got("arrays"));
            let (mut b, mut cc) = (m.b, [0; 5]);
            Pure.arrays(m.a, &mut b, &mut cc, m.ps);
            assert_eq!((r.b, r.c), (b, cc));
        }
        every::CHARS => {
            let m: every::CharsMsg = as_msg(rec);
            let r: every::CharsMsg = as_msg(got("chars"));
            let mut d = m.d;
            let ret = Pure.chars(m.c, &mut d);
            assert_eq!((r.ret, r.d), (ret, d));
        }
        every::STRINGS => {
            let m: every::StringsMsg = as_msg(rec);
            // Each descriptor in record order: its range, then its text.
            let mut next = 0;
            let mut text = Vec::new();
            for d in [m.s, m.io] {
                let Some((off, n)) = desc_ok(d, 1, 1, &mut next, a, max) else {
                    assert_eq!(reply.err(), Some(Status::BadString));
                    return;
                };
                let Ok(t) = std::str::from_utf8(&area[off..off + n]) else {
                    assert_eq!(reply.err(), Some(Status::BadValue));
                    return;
                };
                text.push(t);
            }
            let (s, io) = (text[0], text[1]);
            let want_io = format!("{io}{s}");
            let part = ((a - next.next_multiple_of(8).min(a)) / 2 / 8 * 8).min(max);
            if want_io.len() > part || s.to_uppercase().len() > part {
                assert_eq!(reply.err(), Some(Status::Overflow));
                return;
            }
            let r: every::StringsMsg = as_msg(got("strings"));
            assert_eq!(r.ret, s.len() as i32);
            assert_eq!(fetch(r.io, 1), want_io.as_bytes());
            assert_eq!(fetch(r.o, 1), s.to_uppercase().as_bytes());
        }
        every::SEQS => {
            let m: every::SeqsMsg = as_msg(rec);
            let mut next = 0;
            let ok = [(m.a, 4, 4), (m.ps, 12, 4), (m.b, 2, 2)]
                .map(|(d, size, align)| desc_ok(d, size, align, &mut next, a, max));
            let [Some(_), Some(_), Some(b)] = ok else {
                assert_eq!(reply.err(), Some(Status::BadString));
                return;
            };
            let part = ((a - next.next_multiple_of(8).min(a)) / 2 / 8 * 8).min(max);
            if m.a.len as usize * 8 > part || m.ps.len as usize > part {
                assert_eq!(reply.err(), Some(Status::Overflow));
                return;
            }
            let r: every::SeqsMsg = as_msg(got("seqs"));
            let want_b: Vec<u8> = area[b.0..b.0 + b.1]
                .chunks(2)
                .flat_map(|x| {
                    i16::from_ne_bytes([x[0], x[1]])
                        .wrapping_mul(2)
                        .to_ne_bytes()
                })
                .collect();
            assert_eq!(fetch(m.b, 2), want_b, "inout sequence rewritten in place");
            assert_eq!((r.c.len, r.bytes.len), (m.a.len, m.ps.len));
        }
        _ => {
            // sized, corba, fail: an error status the server can give, or
            // a reply whose out descriptors lie in the area.
            match reply {
                Ok(r) if key == every::FAIL => {
                    let m: every::FailMsg = as_msg(rec);
                    assert!(m.x >= 0);
                    assert_eq!(as_msg::<every::FailMsg>(r).ret, m.x.wrapping_mul(2));
                }
                Ok(r) if key == every::SIZED => {
                    let r: every::SizedMsg = as_msg(r);
                    fetch(r.out_data, 8);
                }
                Ok(r) => {
                    let r: every::CorbaMsg = as_msg(r);
                    fetch(r.name, 1);
                    fetch(r.pts, 12);
                    assert!(r.ok <= 1);
                }
                Err(s) => assert!(
                    matches!(
                        s,
                        Status::BadString
                            | Status::BadValue
                            | Status::Overflow
                            | Status::ServerFailed
                    ),
                    "key {key}: {s:?}"
                ),
            }
        }
    }
}

#[test]
fn hostile_client_gets_errors_or_correct_replies() {
    quiet_panics();
    let max = 600usize;
    let limits = idl::Limits {
        max_strings: 31,
        max_string_bytes: max as u32,
        max_record: 4096,
    };
    let (mut c, mut s) = shm::pair(&Config {
        area: 4096,
        limits,
        ..Config::default()
    })
    .expect("channel");
    c.set_timeout(Some(Duration::from_secs(60)));
    let server = std::thread::spawn(move || every::serve(&mut Pure, &mut s));
    let area_len = c.area_len();
    let mut area = vec![0u8; area_len]; // what the client put, where
    let mut rng = StdRng::seed_from_u64(15);
    let mut seen = std::collections::HashMap::<String, usize>::new();
    for _ in 0..20_000 {
        // Strings: random bytes or text, at random alignments.
        c.begin();
        let mut puts = Vec::new();
        for _ in 0..rng.random_range(0..4) {
            let n = rng.random_range(0..700);
            let bytes: Vec<u8> = if rng.random_bool(0.6) {
                (0..n).map(|_| rng.random_range(b'a'..=b'z')).collect()
            } else {
                (0..n).map(|_| rng.random()).collect()
            };
            let align = [1, 2, 4, 8][rng.random_range(0..4)];
            if let Ok(off) = c.put(&bytes, align) {
                area[off as usize..off as usize + n].copy_from_slice(&bytes);
                puts.push((off, n as u32));
            }
        }
        // A record of random bytes with plausible values sprinkled in.
        let mut rec = vec![0u8; 256];
        rng.fill(&mut rec[..]);
        for _ in 0..rng.random_range(0..8) {
            let at = rng.random_range(0..32) * 4;
            let d = match rng.random_range(0..5) {
                0 if !puts.is_empty() => {
                    let (off, n) = puts[rng.random_range(0..puts.len())];
                    let size = [1, 2, 4, 8, 12][rng.random_range(0..5)];
                    Desc { off, len: n / size }
                }
                1 => Desc {
                    off: rng.random_range(0..area_len as u32 + 8),
                    len: rng.random_range(0..200),
                },
                2 => Desc {
                    off: rng.random_range(0..2),
                    len: rng.random_range(0..2),
                },
                _ => Desc {
                    off: rng.random(),
                    len: rng.random(),
                },
            };
            rec[at..at + 4].copy_from_slice(&d.off.to_ne_bytes());
            rec[at + 4..at + 8].copy_from_slice(&d.len.to_ne_bytes());
        }
        let key = if rng.random_bool(0.95) {
            rng.random_range(0..=every::FAIL)
        } else {
            rng.random()
        };
        let want = request_size(key);
        let len = match rng.random_range(0..4) {
            0 => rng.random_range(0..=rec.len()),
            _ => want.min(rec.len()),
        };
        let reply = match c.call_raw(key, &rec[..len]) {
            Ok(r) => Ok(r.to_vec()),
            Err(CallError::Status(s)) => Err(s),
            Err(e) => panic!("transport failed: {e}"),
        };
        *seen
            .entry(format!("{:?}", reply.as_ref().err()))
            .or_default() += 1;
        expect(
            key,
            &rec,
            len,
            &area,
            max,
            reply.as_deref().map_err(|s| *s),
            &c,
        );
    }
    // Every outcome happened, and the server is still there.
    for s in [
        "None",
        "Some(BadKey)",
        "Some(ShortMessage)",
        "Some(BadString)",
        "Some(BadValue)",
        "Some(Overflow)",
        "Some(ServerFailed)",
    ] {
        assert!(seen.get(s).copied().unwrap_or(0) > 0, "no {s} in {seen:?}");
    }
    let (mut io, mut o) = ("a".to_string(), String::new());
    assert_eq!(
        every::strings(&mut c, "b", &mut io, &mut o).expect("a good call"),
        1
    );
    assert_eq!((io.as_str(), o.as_str()), ("ab", "B"));
    drop(c);
    within(move || server.join().expect("server").expect("ends cleanly"));
}

#[test]
fn a_client_scribbling_during_calls_cannot_stop_the_server() {
    quiet_panics();
    let (mut c, mut s) = shm::pair(&Config {
        area: 8192,
        ..Config::default()
    })
    .expect("channel");
    c.set_timeout(Some(Duration::from_secs(60)));
    let raw = Raw::new(s.fd());
    let server = std::thread::spawn(move || every::serve(&mut Pure, &mut s));
    let stop = Arc::new(AtomicBool::new(false));
    let scribbler = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut rng = StdRng::seed_from_u64(16);
            while !stop.load(Ordering::Relaxed) {
                for _ in 0..64 {
                    let off = rng.random_range(shm::MSG..raw.len);
                    raw.scribble(off, rng.random());
                }
                std::thread::yield_now();
            }
        })
    };
    let mut rng = StdRng::seed_from_u64(17);
    for i in 0..5000 {
        let text: String = (0..rng.random_range(0..100))
            .map(|_| rng.random_range('a'..='z'))
            .collect();
        let (mut io, mut o) = (text.clone(), String::new());
        let mut b = vec![1i16; rng.random_range(0..50)];
        let r = match i % 3 {
            0 => every::strings(&mut c, &text, &mut io, &mut o).map(|_| ()),
            1 => every::seqs(
                &mut c,
                &[1, 2, 3],
                &mut b,
                &mut Vec::new(),
                &[Point::default()],
                &mut Vec::new(),
            ),
            _ => every::flags(&mut c, true, &mut false, &mut false).map(|_| ()),
        };
        match r {
            Ok(()) | Err(CallError::Status(_)) | Err(CallError::Malformed(_)) => {}
            Err(e) => panic!("call {i}: {e}"),
        }
    }
    stop.store(true, Ordering::Relaxed);
    scribbler.join().expect("scribbler");
    let (mut io, mut o) = ("a".to_string(), String::new());
    assert_eq!(
        every::strings(&mut c, "b", &mut io, &mut o).expect("a good call"),
        1
    );
    drop(c);
    within(move || server.join().expect("server").expect("ends cleanly"));
}

#[test]
fn hostile_unet_messages_get_error_replies() {
    quiet_panics();
    let (mut c, mut s) =
        idl::rt::unet::loop_pair(&idl::rt::unet::Config::default()).expect("unet channel");
    c.set_timeout(Some(Duration::from_secs(60)));
    let server = std::thread::spawn(move || every::serve(&mut Pure, &mut s));
    let mut rng = StdRng::seed_from_u64(18);
    let chan = c.chan();
    let mut replies = 0;
    for i in 0..2000u32 {
        // A header that frames its message right, or random bytes.
        let n = rng.random_range(0..300);
        let mut m: Vec<u8> = (0..n).map(|_| rng.random()).collect();
        if i % 2 == 0 {
            let len = rng.random_range(0..64u32);
            let strings = rng.random_range(0..64u32);
            m = vec![
                0;
                idl::rt::unet::HEADER + len.next_multiple_of(8) as usize + strings as usize
            ];
            rng.fill(&mut m[idl::rt::unet::HEADER..]);
            m[0] = idl::rt::unet::REQUEST;
            m[2..4].copy_from_slice(&rng.random_range(0..12u16).to_le_bytes());
            m[4..8].copy_from_slice(&len.to_le_bytes());
            m[8..12].copy_from_slice(&i.to_le_bytes());
            m[12..16].copy_from_slice(&rng.random_range(0..100u32).to_le_bytes());
            m[16..20].copy_from_slice(&strings.to_le_bytes());
        }
        c.endpoint().send(chan, &m).expect("send");
        // Drain replies: each well framed, with a known status.
        let mut tries = 0;
        loop {
            let got = c.endpoint().recv().map(|r| r.to_vec());
            match got {
                Some(r) => {
                    assert!(
                        r.len() >= idl::rt::unet::HEADER && r[0] == idl::rt::unet::REPLY,
                        "{r:?}"
                    );
                    assert!(Status::from_wire(u16::from_le_bytes([r[2], r[3]])).is_some());
                    replies += 1;
                }
                None if tries < 50
                    && m.first() == Some(&idl::rt::unet::REQUEST)
                    && m.len() >= 12 =>
                {
                    tries += 1;
                    std::thread::sleep(Duration::from_micros(200));
                }
                None => break,
            }
        }
    }
    assert!(replies > 500, "{replies} replies");
    // The server still answers a real call.
    let mut d = 0;
    assert_eq!(
        every::chars(&mut c, b'a', &mut d).expect("a good call"),
        b'A'
    );
    c.close();
    within(move || server.join().expect("server").expect("ends cleanly"));
}
