//! Dynamic stubs as a specification: for random operations and values the
//! record the generated `marshal` writes is, field by field, what a
//! reference writer following `model::Layout` writes; replies written by
//! that writer come back as the same values; the native code and vcode's
//! reference backend agree byte for byte; a dynamic client and a dynamic
//! server round-trip the pfs calls through a transport; hostile requests
//! get a status, never a crash; bad values get typed errors.

use idl::dynamic::{CallError, Engine, Handler, Interface, Seq, Value};
use idl::model::{Dir, Prim, Slot, StructDef, Type};
use idl::rt::{CallError as RtError, ClientTransport, ServerTransport, Status};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::ops::Range;
use std::ptr::NonNull;

// ---------------------------------------------------------------------
// An in-process transport: one message buffer, one string area.

const CAP: usize = 4096;
const AREA: usize = 1 << 16;

/// The memory both sides of the loop share.
struct Mem {
    buf: Vec<u64>,
    area: Vec<u64>,
    scratch: Vec<u64>,
    next: usize,
    /// The last reply's strings range and status.
    last: Option<(Status, usize, Range<u32>)>,
}

impl Mem {
    fn new() -> Mem {
        Mem {
            buf: vec![0; CAP / 8],
            area: vec![0; AREA / 8],
            scratch: vec![0; AREA / 8],
            next: 0,
            last: None,
        }
    }
    fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: u64s viewed as bytes.
        unsafe { std::slice::from_raw_parts_mut(self.buf.as_mut_ptr().cast(), CAP) }
    }
    fn area(&mut self) -> &mut [u8] {
        // SAFETY: as above.
        unsafe { std::slice::from_raw_parts_mut(self.area.as_mut_ptr().cast(), AREA) }
    }
}

type Serve<'a> = Box<dyn FnMut(&mut Mem, u16, usize) -> Result<usize, Status> + 'a>;

/// The client's side; `call` runs the server in place.
struct Loop<'a> {
    mem: Mem,
    serve: Serve<'a>,
}

// SAFETY: `buf` is CAP bytes, 8-aligned, owned; `reply_bytes` returns
// slices of the 8-aligned area whose offsets the server uses.
unsafe impl ClientTransport for Loop<'_> {
    fn buf(&mut self) -> NonNull<u8> {
        NonNull::new(self.mem.buf.as_mut_ptr().cast()).expect("vec")
    }
    fn capacity(&self) -> usize {
        CAP
    }
    fn begin(&mut self) {
        self.mem.next = 0;
    }
    fn put(&mut self, bytes: &[u8], align: usize) -> Result<u32, RtError> {
        let off = self.mem.next.next_multiple_of(align.max(1));
        if bytes.len() > (2 << 20) {
            return Err(RtError::StringTooLong {
                len: bytes.len(),
                max: 2 << 20,
            });
        }
        if off + bytes.len() > AREA {
            return Err(RtError::AreaFull {
                len: bytes.len(),
                at: off,
                size: AREA,
            });
        }
        self.mem.area()[off..off + bytes.len()].copy_from_slice(bytes);
        self.mem.next = off + bytes.len();
        Ok(off as u32)
    }
    fn call(&mut self, key: u16, len: usize) -> Result<usize, RtError> {
        (self.serve)(&mut self.mem, key, len).map_err(RtError::Status)
    }
    fn reply_bytes(&self, off: u32, len: usize) -> Result<&[u8], RtError> {
        let off = off as usize;
        if off > AREA || len > AREA - off {
            return Err(RtError::Malformed("descriptor out of the area"));
        }
        // SAFETY: in range of the area.
        Ok(
            unsafe {
                std::slice::from_raw_parts(self.mem.area.as_ptr().cast::<u8>().add(off), len)
            },
        )
    }
}

/// The server's side over the same memory.
struct Side<'m>(&'m mut Mem);

// SAFETY: the regions are owned, disjoint, 8-aligned, of the sizes given.
unsafe impl ServerTransport for Side<'_> {
    fn wait(&mut self) -> Result<(u16, usize), RtError> {
        Err(RtError::Closed)
    }
    fn buf(&mut self) -> NonNull<u8> {
        NonNull::new(self.0.buf.as_mut_ptr().cast()).expect("vec")
    }
    fn capacity(&self) -> usize {
        CAP
    }
    fn area(&mut self) -> (NonNull<u8>, usize) {
        (
            NonNull::new(self.0.area.as_mut_ptr().cast()).expect("vec"),
            AREA,
        )
    }
    fn scratch(&mut self) -> NonNull<u8> {
        NonNull::new(self.0.scratch.as_mut_ptr().cast()).expect("vec")
    }
    fn max_string_bytes(&self) -> u32 {
        2 << 20
    }
    fn reply(&mut self, status: Status, len: usize, strings: Range<u32>) -> Result<(), RtError> {
        self.0.last = Some((status, len, strings));
        Ok(())
    }
}

/// A loop whose server is a dynamic server.
fn dyn_loop<'a>(server: &'a idl::dynamic::DynServer<'a>) -> Loop<'a> {
    Loop {
        mem: Mem::new(),
        serve: Box::new(move |m: &mut Mem, key, len| {
            let mut side = Side(m);
            server
                .handle(&mut side, key, len)
                .map_err(|_| Status::ServerFailed)?;
            match m.last.take() {
                Some((Status::Ok, n, _)) => Ok(n),
                Some((s, _, _)) => Err(s),
                None => Err(Status::ServerFailed),
            }
        }),
    }
}

/// A loop whose server runs the dynamic dispatch in place and answers
/// without `reply` (what `static_loop` does with the static dispatch), for
/// the instruction counts.
fn dyn_loop_bench<'a>(server: &'a idl::dynamic::DynServer<'a>) -> Loop<'a> {
    Loop {
        mem: Mem::new(),
        serve: Box::new(move |m: &mut Mem, key, len| {
            match server.dispatch_in(&mut Side(m), key, len) {
                Ok((Status::Ok, n)) => Ok(n),
                Ok((s, _)) => Err(s),
                Err(_) => Err(Status::ServerFailed),
            }
        }),
    }
}

// ---------------------------------------------------------------------
// The pfs calls, dynamic client against dynamic server.

const PFS: &str = include_str!("../idl/pfs.idl");

/// The pfs server's state, the handlers' context.
#[derive(Default)]
struct Pfs {
    file: Vec<i32>,
    calls: u32,
}

unsafe extern "C" fn h_open(
    ctx: *mut Pfs,
    client: i32,
    fobj: i32,
    flags: i32,
    mode: i32,
    handle: *mut i32,
) -> i32 {
    // SAFETY: the context registered with the handler; `handle` points into the record.
    unsafe {
        (*ctx).calls += 1;
        *handle = client + fobj + flags + mode;
    }
    0
}

unsafe extern "C" fn h_write(
    ctx: *mut Pfs,
    handle: i32,
    pos: *mut i32,
    len: i32,
    data: *const i32,
    n: u64,
) -> i32 {
    // SAFETY: as above; `data` holds `n` checked elements.
    unsafe {
        let d = std::slice::from_raw_parts(data, n as usize);
        (*ctx).file.extend_from_slice(d);
        (*ctx).calls += 1;
        *pos += len;
    }
    handle
}

unsafe extern "C" fn h_dir(
    ctx: *mut Pfs,
    handle: i32,
    pos: *mut i32,
    count: i32,
    data: *mut i32,
    n: *mut u32,
) -> i32 {
    // SAFETY: as above; `data` has room for `*n` elements.
    unsafe {
        let k = (count.max(0) as u32).min(*n);
        for i in 0..k {
            *data.add(i as usize) = handle * 100 + i as i32 + *pos;
        }
        *n = k;
        *pos += k as i32;
        (*ctx).calls += 1;
    }
    7
}

fn pfs_server<'a>(iface: &'a Interface, ctx: &mut Pfs) -> idl::dynamic::DynServer<'a> {
    let c = (ctx as *mut Pfs).cast();
    // SAFETY: the handlers have the signatures docs/idl.md gives for the
    // pfs operations; the context outlives the server in each test.
    unsafe {
        iface
            .server(&[
                ("pfs_open", Handler::new(h_open as *const () as usize, c)),
                ("pfs_write", Handler::new(h_write as *const () as usize, c)),
                (
                    "pfs_get_direntries",
                    Handler::new(h_dir as *const () as usize, c),
                ),
            ])
            .expect("server")
    }
}

fn pfs_round_trip(engine: Engine) {
    let idl = idl::parse(PFS).expect("pfs.idl");
    let iface = Interface::from_idl(&idl, "pfs", Default::default(), engine).expect("load");
    let mut state = Pfs::default();
    let server = pfs_server(&iface, &mut state);
    let mut t = dyn_loop(&server);
    let mut client = iface.client();
    let open = iface.op_index("pfs_open").expect("op");
    let mut a = [
        Value::I32(1),
        Value::I32(2),
        Value::I32(3),
        Value::I32(4),
        Value::Void,
    ];
    assert_eq!(
        client.call(&mut t, open, &mut a).expect("open"),
        Value::I32(0)
    );
    assert_eq!(a[4], Value::I32(10));
    let write = iface.op_index("pfs_write").expect("op");
    let mut a = [
        Value::I32(5),
        Value::I32(100),
        Value::I32(3),
        Value::Seq(Seq::I32(vec![7, 8, 9])),
    ];
    assert_eq!(
        client.call(&mut t, write, &mut a).expect("write"),
        Value::I32(5)
    );
    assert_eq!(a[1], Value::I32(103));
    let dir = iface.op_index("pfs_get_direntries").expect("op");
    let mut a = [Value::I32(2), Value::I32(10), Value::I32(4), Value::Void];
    assert_eq!(
        client.call(&mut t, dir, &mut a).expect("dir"),
        Value::I32(7)
    );
    assert_eq!(a[1], Value::I32(14));
    assert_eq!(a[3], Value::Seq(Seq::I32(vec![210, 211, 212, 213])));
    drop(t);
    drop(server);
    assert_eq!(state.file, vec![7, 8, 9]);
    assert_eq!(state.calls, 3);
}

#[test]
fn pfs_round_trips_natively() {
    pfs_round_trip(Engine::Native);
}

#[test]
fn pfs_round_trips_on_the_reference_backend() {
    pfs_round_trip(Engine::Reference);
}

// ---------------------------------------------------------------------
// Against the static stubs (tests/idl/pfs.rs, what gen_rust makes of
// idl/pfs.idl): each side of one kind talks to the other's.

#[allow(dead_code, clippy::all)]
mod gen_pfs {
    include!("idl/pfs.rs");
}
use gen_pfs::pfs;

/// The same server as the dynamic handlers, behind the static trait.
#[derive(Default)]
struct StaticPfs(Pfs);

impl pfs::Server for StaticPfs {
    fn pfs_open(&mut self, client: i32, fobj: i32, flags: i32, mode: i32, handle: &mut i32) -> i32 {
        // SAFETY: plain pointers to our own values.
        unsafe { h_open(&mut self.0, client, fobj, flags, mode, handle) }
    }
    fn pfs_write(&mut self, handle: i32, pos: &mut i32, len: i32, data: &[i32]) -> i32 {
        // SAFETY: as above; `data` holds its elements.
        unsafe {
            h_write(
                &mut self.0,
                handle,
                pos,
                len,
                data.as_ptr(),
                data.len() as u64,
            )
        }
    }
    fn pfs_get_direntries(
        &mut self,
        handle: i32,
        pos: &mut i32,
        count: i32,
        data: &mut idl::rt::OutSeq<'_, i32>,
    ) -> i32 {
        let mut n = data.capacity() as u32;
        // SAFETY: the spare room holds `capacity` elements.
        let r = unsafe {
            h_dir(
                &mut self.0,
                handle,
                pos,
                count,
                data.spare().as_mut_ptr(),
                &mut n,
            )
        };
        data.advance(n as usize).expect("within the capacity");
        r
    }
}

/// A loop whose server is the static stubs' dispatch.
fn static_loop(server: &mut StaticPfs) -> Loop<'_> {
    Loop {
        mem: Mem::new(),
        serve: Box::new(move |m: &mut Mem, key, len| {
            let mut side = Side(m);
            let req = side.request(len);
            pfs::dispatch(server, key, req).map(|r| r.len)
        }),
    }
}

/// The three pfs calls with the static client stubs; the results.
fn static_calls(t: &mut impl ClientTransport) -> Vec<i32> {
    let mut h = 0;
    let r0 = pfs::pfs_open(t, 1, 2, 3, 4, &mut h).expect("open");
    let mut pos = 100;
    let r1 = pfs::pfs_write(t, 5, &mut pos, 3, &[7, 8, 9]).expect("write");
    let mut pos2 = 10;
    let mut data = Vec::new();
    let r2 = pfs::pfs_get_direntries(t, 2, &mut pos2, 4, &mut data).expect("dir");
    let mut out = vec![r0, h, r1, pos, r2, pos2];
    out.extend(data);
    out
}

/// The same calls with the dynamic client.
fn dynamic_calls<T: ClientTransport>(iface: &Interface, t: &mut T) -> Vec<i32> {
    let mut c = iface.client();
    let int = |v: &Value| match v {
        Value::I32(x) => *x,
        other => panic!("{other:?}"),
    };
    let mut a = [
        Value::I32(1),
        Value::I32(2),
        Value::I32(3),
        Value::I32(4),
        Value::Void,
    ];
    let r0 = c.call(t, 0, &mut a).expect("open");
    let h = int(&a[4]);
    let mut a = [
        Value::I32(5),
        Value::I32(100),
        Value::I32(3),
        Value::Seq(Seq::I32(vec![7, 8, 9])),
    ];
    let r1 = c.call(t, 1, &mut a).expect("write");
    let pos = int(&a[1]);
    let mut b = [Value::I32(2), Value::I32(10), Value::I32(4), Value::Void];
    let r2 = c.call(t, 2, &mut b).expect("dir");
    let mut out = vec![int(&r0), h, int(&r1), pos, int(&r2), int(&b[1])];
    match &b[3] {
        Value::Seq(Seq::I32(d)) => out.extend(d),
        other => panic!("{other:?}"),
    }
    out
}

#[test]
fn dynamic_and_static_stubs_talk_to_each_other() {
    let iface = Interface::load(PFS, "pfs").expect("load");
    // Static against static: what every other pairing must give.
    let mut ss = StaticPfs::default();
    let want = static_calls(&mut static_loop(&mut ss));
    assert_eq!(want, vec![0, 10, 5, 103, 7, 14, 210, 211, 212, 213]);
    // Dynamic client, static server.
    let mut s2 = StaticPfs::default();
    assert_eq!(dynamic_calls(&iface, &mut static_loop(&mut s2)), want);
    // Static client, dynamic server.
    let mut state = Pfs::default();
    let server = pfs_server(&iface, &mut state);
    assert_eq!(static_calls(&mut dyn_loop(&server)), want);
    drop(server);
    assert_eq!(
        (state.file, ss.0.file, s2.0.file),
        (vec![7, 8, 9], vec![7, 8, 9], vec![7, 8, 9])
    );
}

/// The same calls through the slot-level API.
fn slot_calls<T: ClientTransport>(iface: &Interface, t: &mut T) -> Vec<i32> {
    let mut c = iface.client();
    let mut open = [1u64, 2, 3, 4, 0, 0];
    // SAFETY: the slots follow docs/idl.md for each operation; the data
    // pointer is valid for its 3 elements.
    unsafe { c.call_slots(t, 0, &mut open) }.expect("open");
    let data = [7i32, 8, 9];
    let mut write = [5u64, 100, 3, data.as_ptr() as u64, 3, 0];
    // SAFETY: as above.
    unsafe { c.call_slots(t, 1, &mut write) }.expect("write");
    let mut dir = [2u64, 10, 4, 0, 0, 0];
    // SAFETY: as above.
    unsafe { c.call_slots(t, 2, &mut dir) }.expect("dir");
    let mut out = [open[5], open[4], write[5], write[1], dir[5], dir[1]]
        .map(|x| x as i32)
        .to_vec();
    // SAFETY: `unmarshal` pointed the slot at `dir[4]` elements of the
    // reply's string area, valid until the transport is used again.
    let d = unsafe { std::slice::from_raw_parts(dir[3] as *const i32, dir[4] as usize) };
    out.extend(d);
    // Too few slots and an unknown operation are typed errors.
    // SAFETY: refused before any slot is read.
    let short = unsafe { c.call_slots(t, 0, &mut [0u64; 3]) };
    assert!(matches!(short, Err(CallError::Arity { .. })));
    // SAFETY: as above.
    let unknown = unsafe { c.call_slots(t, 9, &mut [0u64; 6]) };
    assert!(matches!(unknown, Err(CallError::NoSuchOp { .. })));
    out
}

#[test]
fn slot_calls_agree_with_the_static_stubs() {
    let mut ss = StaticPfs::default();
    let want = static_calls(&mut static_loop(&mut ss));
    for engine in [Engine::Native, Engine::Reference] {
        let idl = idl::parse(PFS).expect("parse");
        let iface =
            Interface::from_idl(&idl, "pfs", idl::model::Limits::default(), engine).expect("load");
        let mut s2 = StaticPfs::default();
        assert_eq!(slot_calls(&iface, &mut static_loop(&mut s2)), want);
        let mut state = Pfs::default();
        let server = pfs_server(&iface, &mut state);
        assert_eq!(slot_calls(&iface, &mut dyn_loop(&server)), want);
        assert_eq!(slot_calls(&iface, &mut dyn_loop_bench(&server)), want);
    }
}

#[test]
fn dynamic_stubs_over_the_shared_memory_channel() {
    use idl::rt::shm;
    let iface = Interface::load(PFS, "pfs").expect("load");
    let mut ss = StaticPfs::default();
    let want = static_calls(&mut static_loop(&mut ss));
    // Dynamic client against the static server loop, then the static
    // client against the dynamic server, each in two threads.
    let (mut client, mut server_end) = shm::pair(&shm::Config::default()).expect("shm pair");
    std::thread::scope(|sc| {
        sc.spawn(move || {
            let mut srv = StaticPfs::default();
            pfs::serve(&mut srv, &mut server_end).expect("serve");
        });
        assert_eq!(dynamic_calls(&iface, &mut client), want);
        client.close();
    });
    let (mut client, mut server_end) = shm::pair(&shm::Config::default()).expect("shm pair");
    let mut state = Pfs::default();
    let server = pfs_server(&iface, &mut state);
    std::thread::scope(|sc| {
        let server = &server;
        sc.spawn(move || server.serve(&mut server_end).expect("serve"));
        assert_eq!(static_calls(&mut client), want);
        assert_eq!(dynamic_calls(&iface, &mut client), want);
        client.close();
    });
}

#[test]
fn bad_values_get_typed_errors() {
    let iface = Interface::load(PFS, "pfs").expect("load");
    let mut state = Pfs::default();
    let server = pfs_server(&iface, &mut state);
    let mut t = dyn_loop(&server);
    let mut client = iface.client();
    let write = iface.op_index("pfs_write").expect("op");
    let mut a = [Value::I32(5), Value::I32(100), Value::I32(3)];
    match client.call(&mut t, write, &mut a) {
        Err(CallError::Arity {
            expected: 4,
            found: 3,
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
    let mut a = [
        Value::I32(5),
        Value::I64(100),
        Value::I32(3),
        Value::Seq(Seq::I32(vec![])),
    ];
    match client.call(&mut t, write, &mut a) {
        Err(CallError::Type {
            index: 1,
            param,
            expected,
            ..
        }) => {
            assert_eq!(param, "pos");
            assert_eq!(expected, "int32");
        }
        other => panic!("{other:?}"),
    }
    let mut a = [
        Value::I32(5),
        Value::I32(1),
        Value::I32(3),
        Value::Seq(Seq::I16(vec![1])),
    ];
    assert!(matches!(
        client.call(&mut t, write, &mut a),
        Err(CallError::Type { index: 3, .. })
    ));
    let mut a = [
        Value::I32(5),
        Value::I32(1),
        Value::I32(3),
        Value::Str("x".into()),
    ];
    assert!(matches!(
        client.call(&mut t, write, &mut a),
        Err(CallError::Type { index: 3, .. })
    ));
    assert!(matches!(
        client.call(&mut t, 9, &mut []),
        Err(CallError::NoSuchOp { op: 9, .. })
    ));
    // An in value may not be Void; an out value may.
    let open = iface.op_index("pfs_open").expect("op");
    let mut a = [
        Value::Void,
        Value::I32(2),
        Value::I32(3),
        Value::I32(4),
        Value::Void,
    ];
    assert!(matches!(
        client.call(&mut t, open, &mut a),
        Err(CallError::Type { index: 0, .. })
    ));
    // Nothing reached the server.
    drop(t);
    drop(server);
    assert_eq!(state.calls, 0);
    // A string area too small for the data: the transport's typed error.
    let mut small = Loop {
        mem: Mem::new(),
        serve: Box::new(|_, _, _| Ok(0)),
    };
    let mut a = [
        Value::I32(5),
        Value::I32(1),
        Value::I32(3),
        Value::Seq(Seq::I32(vec![0; AREA / 4 + 1])),
    ];
    assert!(matches!(
        client.call(&mut small, write, &mut a),
        Err(CallError::Transport(RtError::AreaFull { .. }))
    ));
}

#[test]
fn limits_are_typed_errors() {
    // A string over the per-string limit, caught by the generated code
    // before the transport sees it.
    let src = "interface l { void put(in string s); void many(in sequence<long> a, in sequence<long> b, in sequence<long> c, in sequence<long> d, in sequence<long> e); };";
    let idl = idl::parse(src).expect("parse");
    let limits = idl::Limits {
        max_string_bytes: 16,
        ..Default::default()
    };
    let iface = Interface::from_idl(&idl, "l", limits, Engine::Native).expect("load");
    let mut t = Loop {
        mem: Mem::new(),
        serve: Box::new(|_, _, _| Ok(0)),
    };
    let mut a = [Value::Str("x".repeat(17))];
    match iface.client().call(&mut t, 0, &mut a) {
        Err(CallError::Transport(RtError::StringTooLong { len: 17, max: 16 })) => {}
        other => panic!("{other:?}"),
    }
    let mut a = [Value::Str("x".repeat(16))];
    assert!(iface.client().call(&mut t, 0, &mut a).is_ok());
    // A handler of more arguments than a call passes (the context and 31).
    let wide: String = (0..16)
        .map(|k| format!("in sequence<long> s{k}"))
        .collect::<Vec<_>>()
        .join(", ");
    let wide = idl::parse(&format!("interface w {{ void wide({wide}); }};")).expect("parse");
    let wide = Interface::from_idl(&wide, "w", Default::default(), Engine::Native).expect("load");
    extern "C" fn nothing() {}
    // SAFETY: never called: generating the server fails.
    let r = unsafe {
        wide.server(&[(
            "wide",
            Handler::new(nothing as *const () as usize, std::ptr::null_mut()),
        )])
    };
    match r {
        Err(idl::dynamic::LoadError::Dispatch(idl::dynamic::GenError::TooManyArgs {
            op,
            needed: 32,
        })) => {
            assert_eq!(op, "wide")
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
    // An unknown operation name.
    // SAFETY: as above.
    let r = unsafe {
        iface.server(&[(
            "nope",
            Handler::new(nothing as *const () as usize, std::ptr::null_mut()),
        )])
    };
    assert!(matches!(r, Err(idl::dynamic::LoadError::NoOp { .. })));
}

// ---------------------------------------------------------------------
// Random operations against a reference writer that follows the layout.

const STRUCTS: &str =
    "struct pt { long x; octet tag; short w[3]; };\nstruct pair { long long k; pt p; };\n";

const PRIMS: [(&str, Prim); 10] = [
    ("boolean", Prim::Bool),
    ("char", Prim::Char),
    ("int8_t", Prim::I8),
    ("octet", Prim::U8),
    ("short", Prim::I16),
    ("unsigned short", Prim::U16),
    ("long", Prim::I32),
    ("unsigned long", Prim::U32),
    ("long long", Prim::I64),
    ("unsigned long long", Prim::U64),
];

/// A random parameter declaration in CORBA syntax (or MIDL for size_is).
fn random_param(rng: &mut StdRng, i: usize) -> String {
    let dir = ["in", "inout", "out"][rng.random_range(0..3)];
    let ty = match rng.random_range(0..7) {
        0 | 1 => PRIMS[rng.random_range(0..PRIMS.len())].0.to_string(),
        2 => "string".into(),
        3 => format!("sequence<{}>", PRIMS[rng.random_range(1..PRIMS.len())].0),
        4 => ["pt", "pair"][rng.random_range(0..2)].into(),
        5 => ["sequence<pt>", "sequence<pair>"][rng.random_range(0..2)].into(),
        _ => {
            let (n, _) = PRIMS[rng.random_range(1..PRIMS.len())];
            return format!("{dir} {n} p{i}[{}]", rng.random_range(1..5));
        }
    };
    if ty == "boolean" && dir != "in" && rng.random_bool(0.5) {
        return format!("{dir} boolean p{i}");
    }
    format!("{dir} {ty} p{i}")
}

fn random_idl(rng: &mut StdRng) -> String {
    let mut ops = String::new();
    for k in 0..3 {
        let n = rng.random_range(0..5);
        let params: Vec<String> = (0..n).map(|i| random_param(rng, i)).collect();
        let ret = match rng.random_range(0..4) {
            0 => "void".to_string(),
            _ => PRIMS[rng.random_range(0..PRIMS.len())].0.to_string(),
        };
        ops.push_str(&format!("  {ret} op{k}({});\n", params.join(", ")));
    }
    format!("{STRUCTS}interface r {{\n{ops}}};\n")
}

fn random_prim(rng: &mut StdRng, p: Prim) -> Value {
    let b: u64 = rng.random();
    match p {
        Prim::Bool => Value::Bool(rng.random_bool(0.5)),
        Prim::Char => Value::Char(b as u8),
        Prim::I8 => Value::I8(b as i8),
        Prim::U8 => Value::U8(b as u8),
        Prim::I16 => Value::I16(b as i16),
        Prim::U16 => Value::U16(b as u16),
        Prim::I32 => Value::I32(b as i32),
        Prim::U32 => Value::U32(b as u32),
        Prim::I64 => Value::I64(b as i64),
        Prim::U64 => Value::U64(b),
    }
}

fn random_value(rng: &mut StdRng, st: &[StructDef], ty: &Type) -> Value {
    match ty {
        Type::Prim(p) => random_prim(rng, *p),
        Type::String => {
            let n = rng.random_range(0..12);
            Value::Str(
                (0..n)
                    .map(|_| ['a', 'é', '→', 'z'][rng.random_range(0..4)])
                    .collect(),
            )
        }
        Type::Struct(id) => Value::Struct(
            st[*id]
                .fields
                .iter()
                .map(|(_, t)| random_value(rng, st, t))
                .collect(),
        ),
        Type::Array(e, n) => random_seq(rng, st, e, *n as usize),
        Type::Sequence(e) => {
            let n = rng.random_range(0..6);
            random_seq(rng, st, e, n)
        }
    }
}

fn random_seq(rng: &mut StdRng, st: &[StructDef], e: &Type, n: usize) -> Value {
    let vals: Vec<Value> = (0..n).map(|_| random_value(rng, st, e)).collect();
    let Type::Prim(p) = e else {
        return Value::Seq(Seq::Values(vals));
    };
    let bits = |v: &Value| match *v {
        Value::Char(x) | Value::U8(x) => x as u64,
        Value::I8(x) => x as u64,
        Value::I16(x) => x as u64,
        Value::U16(x) => x as u64,
        Value::I32(x) => x as u64,
        Value::U32(x) => x as u64,
        Value::I64(x) => x as u64,
        Value::U64(x) => x,
        _ => 0,
    };
    let b: Vec<u64> = vals.iter().map(bits).collect();
    Value::Seq(match p {
        Prim::I8 => Seq::I8(b.iter().map(|&x| x as i8).collect()),
        Prim::U8 | Prim::Char | Prim::Bool => Seq::U8(b.iter().map(|&x| x as u8).collect()),
        Prim::I16 => Seq::I16(b.iter().map(|&x| x as i16).collect()),
        Prim::U16 => Seq::U16(b.iter().map(|&x| x as u16).collect()),
        Prim::I32 => Seq::I32(b.iter().map(|&x| x as i32).collect()),
        Prim::U32 => Seq::U32(b.iter().map(|&x| x as u32).collect()),
        Prim::I64 => Seq::I64(b.iter().map(|&x| x as i64).collect()),
        Prim::U64 => Seq::U64(b),
    })
}

/// C size and alignment, computed here independently of the crate.
fn c_size(st: &[StructDef], ty: &Type) -> (usize, usize) {
    match ty {
        Type::Prim(p) => (p.size() as usize, p.size() as usize),
        Type::Struct(id) => (st[*id].size as usize, st[*id].align as usize),
        Type::Array(e, n) => {
            let (s, a) = c_size(st, e);
            (s * *n as usize, a)
        }
        Type::String | Type::Sequence(_) => (8, 4),
    }
}

/// The reference writer: `v` of type `ty` in C layout.
fn write_c(st: &[StructDef], ty: &Type, v: &Value, out: &mut Vec<u8>) {
    let start = out.len();
    match (ty, v) {
        (Type::Prim(p), v) => {
            let b: u64 = match *v {
                Value::Bool(x) => x as u64,
                Value::Char(x) | Value::U8(x) => x as u64,
                Value::I8(x) => x as u64,
                Value::I16(x) => x as u64,
                Value::U16(x) => x as u64,
                Value::I32(x) => x as u64,
                Value::U32(x) => x as u64,
                Value::I64(x) => x as u64,
                Value::U64(x) => x,
                _ => panic!("not a scalar"),
            };
            out.extend_from_slice(&b.to_le_bytes()[..p.size() as usize]);
        }
        (Type::Struct(id), Value::Struct(fs)) => {
            for ((_, t), f) in st[*id].fields.iter().zip(fs) {
                let a = c_size(st, t).1;
                while !(out.len() - start).is_multiple_of(a) {
                    out.push(0);
                }
                write_c(st, t, f, out);
            }
            while out.len() - start < st[*id].size as usize {
                out.push(0);
            }
        }
        (Type::Array(e, _) | Type::Sequence(e), Value::Seq(s)) => {
            for x in seq_values(s) {
                write_c(st, e, &x, out);
            }
        }
        _ => panic!("no C layout for {ty:?}"),
    }
}

fn seq_values(s: &Seq) -> Vec<Value> {
    match s {
        Seq::I8(v) => v.iter().map(|&x| Value::I8(x)).collect(),
        Seq::U8(v) => v.iter().map(|&x| Value::U8(x)).collect(),
        Seq::I16(v) => v.iter().map(|&x| Value::I16(x)).collect(),
        Seq::U16(v) => v.iter().map(|&x| Value::U16(x)).collect(),
        Seq::I32(v) => v.iter().map(|&x| Value::I32(x)).collect(),
        Seq::U32(v) => v.iter().map(|&x| Value::U32(x)).collect(),
        Seq::I64(v) => v.iter().map(|&x| Value::I64(x)).collect(),
        Seq::U64(v) => v.iter().map(|&x| Value::U64(x)).collect(),
        Seq::Values(v) => v.clone(),
    }
}

/// The bytes and element count of an indirect value.
fn indirect_bytes(st: &[StructDef], ty: &Type, v: &Value) -> (Vec<u8>, usize, usize) {
    match (ty, v) {
        (Type::String, Value::Str(s)) => (s.as_bytes().to_vec(), s.len(), 1),
        (Type::Sequence(e), Value::Seq(s)) => {
            let mut out = Vec::new();
            for x in seq_values(s) {
                write_c(st, e, &x, &mut out);
            }
            (out, s.len(), c_size(st, e).1)
        }
        _ => panic!("not indirect"),
    }
}

/// One random operation's check against the reference writer, on both
/// backends; returns the request records (native, reference).
fn check_op(rng: &mut StdRng, idl: &idl::Idl, ifaces: &[Interface], k: usize) {
    let st = &idl.structs;
    let op = &idl.interfaces[0].ops[k];
    let lay = &op.layout;
    // The values in and the results the "server" writes.
    let value_params: Vec<usize> = (0..op.params.len())
        .filter(|&i| op.params[i].length_of.is_none())
        .collect();
    let ins: Vec<Value> = value_params
        .iter()
        .map(|&i| {
            let p = &op.params[i];
            if p.dir == Dir::Out && rng.random_bool(0.5) {
                Value::Void
            } else {
                random_value(rng, st, &p.ty)
            }
        })
        .collect();
    let outs: Vec<Value> = value_params
        .iter()
        .map(|&i| {
            let p = &op.params[i];
            match (&p.dir, &p.ty) {
                (Dir::In, _) => Value::Void,
                // An inout sequence comes back with its length.
                (Dir::InOut, Type::Sequence(e)) => {
                    match &ins[value_params.iter().position(|&j| j == i).unwrap()] {
                        Value::Seq(s) => random_seq(rng, st, e, s.len()),
                        _ => unreachable!(),
                    }
                }
                _ => random_value(rng, st, &p.ty),
            }
        })
        .collect();
    let ret = op.ret.as_ref().map(|t| random_value(rng, st, t));
    // The expected request: record fields and string area.
    let mut want_rec = vec![None::<u8>; lay.size as usize];
    let mut want_area = Vec::<u8>::new();
    for f in &lay.fields {
        let Slot::Param(i) = f.slot else { continue };
        let p = &op.params[i];
        if p.dir == Dir::Out {
            continue;
        }
        let v = &ins[value_params.iter().position(|&j| j == i).unwrap()];
        let bytes = if p.ty.is_indirect() {
            let (b, n, align) = indirect_bytes(st, &p.ty, v);
            while !want_area.len().is_multiple_of(align) {
                want_area.push(0);
            }
            let off = want_area.len() as u32;
            want_area.extend_from_slice(&b);
            [off.to_le_bytes(), (n as u32).to_le_bytes()].concat()
        } else {
            let mut b = Vec::new();
            write_c(st, &p.ty, v, &mut b);
            b
        };
        assert_eq!(bytes.len(), f.size as usize);
        for (j, b) in bytes.into_iter().enumerate() {
            want_rec[f.offset as usize + j] = Some(b);
        }
    }
    // The reply the reference writer puts in place.
    let reply = |mem: &mut Mem| {
        let mut at = AREA / 2;
        for f in &lay.fields {
            let (ty, v) = match f.slot {
                Slot::Ret => (op.ret.as_ref().unwrap(), ret.clone().unwrap()),
                Slot::Param(i) if op.params[i].dir != Dir::In => (
                    &op.params[i].ty,
                    outs[value_params.iter().position(|&j| j == i).unwrap()].clone(),
                ),
                _ => continue,
            };
            let bytes = if ty.is_indirect() {
                let (b, n, _) = indirect_bytes(st, ty, &v);
                mem.area()[at..at + b.len()].copy_from_slice(&b);
                let d = [(at as u32).to_le_bytes(), (n as u32).to_le_bytes()].concat();
                at = (at + b.len()).next_multiple_of(8);
                d
            } else {
                let mut b = Vec::new();
                write_c(st, ty, &v, &mut b);
                b
            };
            mem.bytes()[f.offset as usize..][..bytes.len()].copy_from_slice(&bytes);
        }
    };
    let mut records = Vec::new();
    for iface in ifaces {
        let seen = std::cell::RefCell::new(None);
        let mut t = Loop {
            mem: Mem::new(),
            serve: Box::new(|m: &mut Mem, key, len| {
                assert_eq!(key as usize, k);
                assert_eq!(len, lay.request_size as usize);
                let rec = m.bytes()[..lay.size as usize].to_vec();
                let next = m.next;
                let area = m.area()[..next].to_vec();
                *seen.borrow_mut() = Some((rec, area));
                reply(m);
                Ok(lay.size as usize)
            }),
        };
        let mut args = ins.clone();
        let r = iface
            .client()
            .call(&mut t, k, &mut args)
            .unwrap_or_else(|e| panic!("{}: {e}", op.name));
        drop(t);
        let (rec, area) = seen.into_inner().expect("the call reached the transport");
        for (j, w) in want_rec.iter().enumerate() {
            if let Some(w) = w {
                assert_eq!(rec[j], *w, "{}: request byte {j}", op.name);
            }
        }
        assert_eq!(area, want_area, "{}: string area", op.name);
        // The results are the reply's values.
        for (j, &i) in value_params.iter().enumerate() {
            let want = if op.params[i].dir == Dir::In {
                &ins[j]
            } else {
                &outs[j]
            };
            assert_eq!(&args[j], want, "{}: value {}", op.name, op.params[i].name);
        }
        assert_eq!(r, ret.clone().unwrap_or(Value::Void), "{}: return", op.name);
        records.push(rec);
    }
    // Differential: the reference backend wrote the same record bytes.
    let masked = |r: &Vec<u8>| -> Vec<Option<u8>> {
        r.iter()
            .zip(&want_rec)
            .map(|(b, w)| w.map(|_| *b))
            .collect()
    };
    assert_eq!(
        masked(&records[0]),
        masked(&records[1]),
        "{}: native against reference",
        op.name
    );
}

#[test]
fn random_operations_marshal_as_the_layout_says() {
    let mut rng = StdRng::seed_from_u64(15);
    for _ in 0..60 {
        let src = random_idl(&mut rng);
        let idl = idl::parse(&src).unwrap_or_else(|e| panic!("{e}\n{src}"));
        let ifaces: Vec<Interface> = [Engine::Native, Engine::Reference]
            .into_iter()
            .map(|e| Interface::from_idl(&idl, "r", Default::default(), e).expect("load"))
            .collect();
        for k in 0..idl.interfaces[0].ops.len() {
            check_op(&mut rng, &idl, &ifaces, k);
        }
    }
}

// ---------------------------------------------------------------------
// Random operations, dynamic client to dynamic server: one generic C
// handler reads its arguments by the documented conventions.

/// What the generic handler is given and what it saw.
struct Gen {
    plan: idl::dynamic::OpPlan,
    /// Per value: the C bytes the handler writes back (out, inout,
    /// return), with the element count for strings and sequences.
    reply: Vec<(Vec<u8>, usize)>,
    /// Per value: the C bytes the handler received (in, inout).
    seen: Vec<Vec<u8>>,
}

/// The generic handler: `ctx`, then the C convention's most arguments
/// (registers, then the stack); arguments past those the operation takes
/// are not read as values.
#[allow(clippy::too_many_arguments)]
extern "C" fn generic(
    ctx: *mut Gen,
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
    use idl::dynamic::Kind;
    // SAFETY: the context registered for this operation.
    let g = unsafe { &mut *ctx };
    let args = [
        a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19,
        a20, a21, a22, a23, a24, a25, a26, a27, a28, a29, a30,
    ];
    let mut next = args.iter().copied();
    let mut ret = 0;
    for (j, v) in g.plan.values.clone().iter().enumerate() {
        let (bytes, count) = g.reply[j].clone();
        match (v.dir, v.kind) {
            (_, Kind::Prim(p)) if v.param.is_none() => {
                let mut w = [0u8; 8];
                w[..p.size() as usize].copy_from_slice(&bytes);
                ret = u64::from_le_bytes(w);
            }
            (Dir::In, Kind::Prim(p)) => {
                let x = next.next().unwrap_or(0);
                g.seen[j] = x.to_le_bytes()[..p.size() as usize].to_vec();
            }
            (dir, Kind::Prim(_) | Kind::Agg { .. }) => {
                let ptr = next.next().unwrap_or(0) as *mut u8;
                let size = match v.kind {
                    Kind::Prim(p) => p.size() as usize,
                    Kind::Agg { size, .. } => size as usize,
                    _ => 0,
                };
                // SAFETY: a pointer into the record, `size` bytes.
                unsafe {
                    g.seen[j] = std::slice::from_raw_parts(ptr, size).to_vec();
                    if dir != Dir::In {
                        std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr, size);
                    }
                }
            }
            (Dir::In | Dir::InOut, Kind::Ind { esize, .. }) => {
                let (ptr, n) = (
                    next.next().unwrap_or(0) as *mut u8,
                    next.next().unwrap_or(0) as usize,
                );
                let len = n * esize as usize;
                // SAFETY: checked by the dispatch: `n` elements.
                unsafe {
                    g.seen[j] = if len == 0 {
                        Vec::new()
                    } else {
                        std::slice::from_raw_parts(ptr, len).to_vec()
                    };
                    if v.dir == Dir::InOut {
                        assert_eq!(count, n);
                        std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr, len);
                    }
                }
            }
            (_, Kind::Ind { .. }) => {
                let (ptr, lenp) = (
                    next.next().unwrap_or(0) as *mut u8,
                    next.next().unwrap_or(0) as *mut u32,
                );
                // SAFETY: the region the dispatch gave, `*lenp` elements of room.
                unsafe {
                    assert!(count <= *lenp as usize);
                    std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr, bytes.len());
                    *lenp = count as u32;
                }
            }
        }
    }
    ret
}

#[test]
fn random_operations_round_trip_through_the_dynamic_server() {
    let mut rng = StdRng::seed_from_u64(16);
    let (mut ran, mut skipped) = (0, 0);
    for _ in 0..40 {
        let src = random_idl(&mut rng);
        let idl = idl::parse(&src).unwrap_or_else(|e| panic!("{e}\n{src}"));
        let st = &idl.structs;
        for engine in [Engine::Native, Engine::Reference] {
            let iface = Interface::from_idl(&idl, "r", Default::default(), engine).expect("load");
            for (k, plan) in iface.ops().iter().enumerate() {
                let op = &plan.op;
                let ins: Vec<Value> = plan
                    .params()
                    .iter()
                    .map(|v| {
                        if v.dir == Dir::Out {
                            Value::Void
                        } else {
                            random_value(&mut rng, st, &v.ty)
                        }
                    })
                    .collect();
                let outs: Vec<Value> = plan
                    .values
                    .iter()
                    .enumerate()
                    .map(|(j, v)| match (v.dir, &v.ty) {
                        (Dir::In, _) => Value::Void,
                        (Dir::InOut, Type::Sequence(e)) => match &ins[j] {
                            Value::Seq(s) => random_seq(&mut rng, st, e, s.len()),
                            _ => unreachable!(),
                        },
                        (Dir::InOut, Type::String) => match &ins[j] {
                            Value::Str(s) => Value::Str("x".repeat(s.len())),
                            _ => unreachable!(),
                        },
                        _ => random_value(&mut rng, st, &v.ty),
                    })
                    .collect();
                let c_bytes = |v: &idl::dynamic::ValuePlan, x: &Value| -> (Vec<u8>, usize) {
                    match x {
                        Value::Void => (Vec::new(), 0),
                        x if v.ty.is_indirect() => {
                            let (b, n, _) = indirect_bytes(st, &v.ty, x);
                            (b, n)
                        }
                        x => {
                            let mut b = Vec::new();
                            write_c(st, &v.ty, x, &mut b);
                            (b, 1)
                        }
                    }
                };
                let reply: Vec<(Vec<u8>, usize)> = plan
                    .values
                    .iter()
                    .zip(&outs)
                    .map(|(v, x)| c_bytes(v, x))
                    .collect();
                let mut g = Gen {
                    plan: plan.clone(),
                    reply,
                    seen: vec![Vec::new(); plan.values.len()],
                };
                // SAFETY: `generic` reads its arguments by the conventions
                // of docs/idl.md; `g` outlives the server.
                let server = unsafe {
                    iface.server(&[(
                        op.name.as_str(),
                        Handler::new(generic as *const () as usize, (&mut g as *mut Gen).cast()),
                    )])
                };
                let server = match server {
                    Ok(s) => s,
                    Err(idl::dynamic::LoadError::Dispatch(
                        idl::dynamic::GenError::TooManyArgs { .. },
                    )) => {
                        skipped += 1;
                        continue;
                    }
                    Err(e) => panic!("{e}"),
                };
                let mut t = dyn_loop(&server);
                let mut args = ins.clone();
                let r = iface
                    .client()
                    .call(&mut t, k, &mut args)
                    .unwrap_or_else(|e| panic!("{}: {e}\n{src}", op.name));
                drop(t);
                drop(server);
                ran += 1;
                for (j, v) in plan.params().iter().enumerate() {
                    if v.dir != Dir::Out {
                        assert_eq!(
                            g.seen[j],
                            c_bytes(v, &ins[j]).0,
                            "{}: the server saw {}\n{src}",
                            op.name,
                            v.name
                        );
                    }
                    let want = if v.dir == Dir::In { &ins[j] } else { &outs[j] };
                    assert_eq!(&args[j], want, "{}: {} came back\n{src}", op.name, v.name);
                }
                assert_eq!(
                    r,
                    outs.last()
                        .filter(|_| plan.has_ret)
                        .cloned()
                        .unwrap_or(Value::Void),
                    "{}: return\n{src}",
                    op.name
                );
            }
        }
    }
    // Operations of up to four values always fit the handler's registers.
    assert_eq!(skipped, 0);
    assert_eq!(ran, 240);
}

// ---------------------------------------------------------------------
// Hostile requests to the generated dispatch.

#[test]
fn hostile_requests_get_a_status() {
    let src = format!(
        "{STRUCTS}interface h {{ long a(in string s, in sequence<pt> q, out string o, in boolean b); long b(inout sequence<long> x, out pair p); }};"
    );
    for engine in [Engine::Native, Engine::Reference] {
        let idl = idl::parse(&src).expect("parse");
        let iface = Interface::from_idl(&idl, "h", Default::default(), engine).expect("load");
        extern "C" fn ha(
            _: *mut u8,
            s: *const u8,
            n: u64,
            _q: *const u8,
            _m: u64,
            o: *mut u8,
            on: *mut u32,
            b: u32,
        ) -> i32 {
            // SAFETY: the dispatch checked `s`; `o` has room for `*on` bytes.
            unsafe {
                let s = std::slice::from_raw_parts(s, n as usize);
                assert!(std::str::from_utf8(s).is_ok());
                let k = (*on as usize).min(s.len());
                std::ptr::copy_nonoverlapping(s.as_ptr(), o, k);
                *on = k as u32;
            }
            assert!(b <= 1);
            n as i32
        }
        extern "C" fn hb(_: *mut u8, x: *mut i32, n: u64, p: *mut u8) -> i32 {
            // SAFETY: checked by the dispatch.
            unsafe {
                for i in 0..n as usize {
                    *x.add(i) += 1;
                }
                *p = 1;
            }
            0
        }
        // SAFETY: the signatures follow docs/idl.md for these operations.
        let server = unsafe {
            iface.server(&[
                (
                    "a",
                    Handler::new(ha as *const () as usize, std::ptr::null_mut()),
                ),
                (
                    "b",
                    Handler::new(hb as *const () as usize, std::ptr::null_mut()),
                ),
            ])
        }
        .expect("server");
        let mut rng = StdRng::seed_from_u64(7);
        let mut mem = Mem::new();
        let mut seen = [0u32; 8];
        for round in 0..3000 {
            let key: u16 = rng.random_range(0..4);
            let len = rng.random_range(0..80);
            for b in mem.bytes()[..96].iter_mut() {
                *b = match rng.random_range(0..4) {
                    0 => 0,
                    1 => rng.random_range(0..3),
                    _ => rng.random(),
                };
            }
            if round % 2 == 0 {
                // Plausible descriptors: small offsets and counts.
                for w in mem.buf[..12].iter_mut() {
                    *w = (rng.random_range(0..64u64)) | (rng.random_range(0..8u64) << 32);
                }
            }
            let mut side = Side(&mut mem);
            let (status, _) = server.dispatch_in(&mut side, key, len).expect("dispatch");
            seen[status as usize] += 1;
            if key >= 2 {
                assert_eq!(status, Status::BadKey);
            }
        }
        assert!(seen[Status::Ok as usize] > 0, "{seen:?}");
        assert!(seen[Status::BadString as usize] > 0, "{seen:?}");
        assert!(seen[Status::ShortMessage as usize] > 0, "{seen:?}");
    }
}

// ---------------------------------------------------------------------
// The benchmark helper's entry: instructions of the dynamic path.

/// Runs `n` rounds of the three pfs calls, dynamic client to dynamic
/// server in process (for `valgrind --tool=callgrind`; see docs/idl.md).
/// `cargo test -p idl --release --test dynamic -- --ignored pfs_calls_for_callgrind`.
#[test]
#[ignore = "a workload for callgrind, not a test"]
fn pfs_calls_for_callgrind() {
    let n: usize = std::env::var("IDL_DYN_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let iface = Interface::load(PFS, "pfs").expect("load");
    let mut state = Pfs::default();
    let server = pfs_server(&iface, &mut state);
    let mut t = dyn_loop_bench(&server);
    let mut client = iface.client();
    let (open, write, dir) = (0, 1, 2);
    let mut a_open = [
        Value::I32(1),
        Value::I32(2),
        Value::I32(3),
        Value::I32(4),
        Value::Void,
    ];
    let mut a_write = [
        Value::I32(5),
        Value::I32(0),
        Value::I32(4),
        Value::Seq(Seq::I32(vec![1, 2, 3, 4])),
    ];
    let mut a_dir = [Value::I32(2), Value::I32(0), Value::I32(4), Value::Void];
    let which = std::env::var("IDL_DYN_OPS").unwrap_or_else(|_| "open,write,dir".into());
    let (do_open, do_write, do_dir) = (
        which.contains("open"),
        which.contains("write"),
        which.contains("dir"),
    );
    if std::env::var("IDL_DYN_API").is_ok_and(|a| a == "static") {
        // The static stubs over the same loop, for comparison.
        let mut srv = StaticPfs::default();
        let mut t = static_loop(&mut srv);
        let data = [1i32, 2, 3, 4];
        let mut out = Vec::with_capacity(8);
        for _ in 0..n {
            if do_open {
                static_open(&mut t);
            }
            if do_write {
                static_write(&mut t, &data);
            }
            if do_dir {
                static_dir(&mut t, &mut out);
            }
        }
        return;
    }
    if std::env::var("IDL_DYN_API").is_ok_and(|a| a == "slots") {
        // The slot-level API: the generated code and the transport only.
        let data = [1i32, 2, 3, 4];
        let mut s_open = [1u64, 2, 3, 4, 0, 0];
        let mut s_write = [5u64, 0, 4, data.as_ptr() as u64, 4, 0];
        let mut s_dir = [2u64, 0, 4, 0, 0, 0];
        for _ in 0..n {
            // SAFETY: the slots follow docs/idl.md for each operation; the
            // data pointer is valid for its 4 elements.
            unsafe {
                if do_open {
                    slots_call(&mut client, &mut t, open, &mut s_open);
                }
                if do_write {
                    slots_call(&mut client, &mut t, write, &mut s_write);
                }
                if do_dir {
                    slots_call(&mut client, &mut t, dir, &mut s_dir);
                    s_dir[1] = 0;
                }
            }
        }
        return;
    }
    for _ in 0..n {
        if do_open {
            dyn_open(&mut client, &mut t, open, &mut a_open);
        }
        if do_write {
            dyn_write(&mut client, &mut t, write, &mut a_write);
        }
        if do_dir {
            dyn_dir(&mut client, &mut t, dir, &mut a_dir);
        }
    }
    std::hint::black_box(&state.calls);
    if std::env::var_os("IDL_DYN_LIST").is_some() {
        for op in 0..3 {
            let (m, u) = iface.listing(op).expect("op");
            println!("{m}\n{u}");
        }
        println!("{}", server.listing());
    }
}

#[inline(never)]
fn static_open(t: &mut Loop<'_>) {
    let mut h = 0;
    std::hint::black_box(pfs::pfs_open(t, 1, 2, 3, 4, &mut h).ok());
    std::hint::black_box(h);
}

#[inline(never)]
fn static_write(t: &mut Loop<'_>, data: &[i32]) {
    let mut pos = 0;
    std::hint::black_box(pfs::pfs_write(t, 5, &mut pos, 4, data).ok());
    std::hint::black_box(pos);
}

#[inline(never)]
fn static_dir(t: &mut Loop<'_>, out: &mut Vec<i32>) {
    let mut pos = 0;
    std::hint::black_box(pfs::pfs_get_direntries(t, 2, &mut pos, 4, out).ok());
    std::hint::black_box(pos);
}

/// # Safety
/// As `DynClient::call_slots`.
#[inline(never)]
unsafe fn slots_call(
    c: &mut idl::dynamic::DynClient<'_>,
    t: &mut Loop<'_>,
    op: usize,
    s: &mut [u64],
) {
    // SAFETY: the caller's.
    std::hint::black_box(unsafe { c.call_slots(t, op, s) }.ok());
}

#[inline(never)]
fn dyn_open(c: &mut idl::dynamic::DynClient<'_>, t: &mut Loop<'_>, op: usize, a: &mut [Value]) {
    std::hint::black_box(c.call(t, op, a).ok());
}

#[inline(never)]
fn dyn_write(c: &mut idl::dynamic::DynClient<'_>, t: &mut Loop<'_>, op: usize, a: &mut [Value]) {
    std::hint::black_box(c.call(t, op, a).ok());
}

#[inline(never)]
fn dyn_dir(c: &mut idl::dynamic::DynClient<'_>, t: &mut Loop<'_>, op: usize, a: &mut [Value]) {
    std::hint::black_box(c.call(t, op, a).ok());
}

// ---------------------------------------------------------------------
// size_is lengths of narrow types (tests/idl/counts.idl): a `size_is(n)`
// length does not travel, its value is the sequence's length, so `n`'s
// type bounds the count. The C stubs checked it (a C server answers
// `BadValue` past `INT16_MAX` for a `short` length); the Rust and dynamic
// stubs did not, so a Rust client could send 32,768 elements that a Rust
// server took and a C server refused.

#[allow(dead_code, clippy::all)]
mod gen_counts {
    include!("idl/counts.rs");
}
use gen_counts::counts;

const COUNTS: &str = include_str!("idl/counts.idl");

/// counts.idl with `long` lengths: the same records, so its clients send
/// what counts.idl's clients may not.
const COUNTS_WIDE: &str = "interface counts {
    long clip([in] long k, [in, size_is(k)] long *v);
    long tiny([in] long n, [in, out, size_is(n)] short *s);
};";

struct StaticCounts;

impl counts::Server for StaticCounts {
    fn clip(&mut self, v: &[i32]) -> i32 {
        v.len() as i32
    }
    fn tiny(&mut self, s: &mut [i16]) -> i32 {
        s.iter_mut().for_each(|x| *x += 1);
        s.len() as i32
    }
}

fn counts_static_loop(server: &mut StaticCounts) -> Loop<'_> {
    Loop {
        mem: Mem::new(),
        serve: Box::new(move |m: &mut Mem, key, len| {
            let mut side = Side(m);
            let req = side.request(len);
            counts::dispatch(server, key, req).map(|r| r.len)
        }),
    }
}

unsafe extern "C" fn h_clip(_: *mut std::ffi::c_void, _v: *const i32, n: u64) -> i32 {
    n as i32
}

unsafe extern "C" fn h_tiny(_: *mut std::ffi::c_void, s: *mut i16, n: u64) -> i32 {
    // SAFETY: the dynamic server passes `n` checked elements at `s`.
    let s = unsafe { std::slice::from_raw_parts_mut(s, n as usize) };
    s.iter_mut().for_each(|x| *x += 1);
    n as i32
}

fn counts_server(iface: &Interface) -> idl::dynamic::DynServer<'_> {
    // SAFETY: the handlers have the signatures docs/idl.md gives for the
    // operations (the size_is lengths left out); they use no context.
    unsafe {
        iface
            .server(&[
                (
                    "clip",
                    Handler::new(h_clip as *const () as usize, std::ptr::null_mut()),
                ),
                (
                    "tiny",
                    Handler::new(h_tiny as *const () as usize, std::ptr::null_mut()),
                ),
            ])
            .expect("server")
    }
}

/// `tiny` with `n` shorts through the dynamic client of `iface`.
fn dyn_tiny<T: ClientTransport>(iface: &Interface, t: &mut T, n: usize) -> Result<i32, CallError> {
    let mut a = [Value::Seq(Seq::I16(vec![7; n]))];
    let r = iface
        .client()
        .call(t, iface.op_index("tiny").expect("op"), &mut a)?;
    match (r, &a[0]) {
        (Value::I32(r), Value::Seq(Seq::I16(s))) => {
            assert!(
                s.iter().all(|&x| x == 8),
                "the server's inout values came back"
            );
            Ok(r)
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn size_is_counts_past_the_length_type_are_refused_by_every_stub() {
    let narrow = Interface::load(COUNTS, "counts").expect("counts.idl");
    let wide = Interface::load(COUNTS_WIDE, "counts").expect("wide");
    let count_too_large = |e: &RtError, param: &str, len: usize, max: u32| {
        assert!(
            matches!(e, RtError::CountTooLarge { param: p, len: l, max: m }
                if p == param && *l == len && *m == max),
            "{e}"
        );
        // The message names the parameter, its length and the bound.
        let s = e.to_string();
        assert!(
            s.contains(&format!("`{param}` holds {len} elements")) && s.contains(&max.to_string()),
            "{s}"
        );
    };
    let transport = |e: CallError| match e {
        CallError::Transport(e) => e,
        other => panic!("{other}"),
    };

    // Clients refuse before sending: the static stubs and the dynamic ones.
    let mut ss = StaticCounts;
    let mut t = counts_static_loop(&mut ss);
    let e = counts::clip(&mut t, &vec![1; 32_768]).expect_err("refused");
    count_too_large(&e, "v", 32_768, 32_767);
    assert_eq!(counts::clip(&mut t, &[1; 100]).expect("clip"), 100);
    let mut s = vec![7i16; 256];
    let e = counts::tiny(&mut t, &mut s).expect_err("refused");
    count_too_large(&e, "s", 256, 255);
    let mut s = vec![7i16; 255];
    assert_eq!(counts::tiny(&mut t, &mut s).expect("tiny"), 255);
    assert!(s.iter().all(|&x| x == 8));
    let e = dyn_tiny(&narrow, &mut t, 256).expect_err("refused");
    count_too_large(&transport(e), "s", 256, 255);
    assert_eq!(dyn_tiny(&narrow, &mut t, 255).expect("tiny"), 255);
    // The slot-level call too (the fast path's marshal).
    let mut v = vec![7i16; 256];
    let mut slots = [v.as_mut_ptr() as u64, 256, 0];
    let tiny = narrow.op_index("tiny").expect("op");
    // SAFETY: the slots are `tiny`'s: a pointer to 256 shorts and their
    // count, then the return value's slot.
    let e = unsafe { narrow.client().call_slots(&mut t, tiny, &mut slots) }.expect_err("refused");
    count_too_large(&transport(e), "s", 256, 255);

    // Servers answer BadValue to a client that sends more (one whose
    // lengths are `long`): the static server and the dynamic one.
    for engine in [Engine::Native, Engine::Reference] {
        let idl = idl::parse(COUNTS).expect("counts.idl");
        let iface = Interface::from_idl(&idl, "counts", Default::default(), engine).expect("load");
        let server = counts_server(&iface);
        let mut t = dyn_loop(&server);
        assert_eq!(dyn_tiny(&wide, &mut t, 255).expect("tiny"), 255);
        let e = transport(dyn_tiny(&wide, &mut t, 256).expect_err("refused"));
        assert!(matches!(e, RtError::Status(Status::BadValue)), "{e}");
    }
    let mut ss = StaticCounts;
    let mut t = counts_static_loop(&mut ss);
    assert_eq!(dyn_tiny(&wide, &mut t, 255).expect("tiny"), 255);
    let e = transport(dyn_tiny(&wide, &mut t, 256).expect_err("refused"));
    assert!(matches!(e, RtError::Status(Status::BadValue)), "{e}");
}

// ---------------------------------------------------------------------
// Handlers with more arguments than the dispatch passes in registers.

/// What `many_args` saw: its 31 arguments after the context.
static MANY_SEEN: std::sync::Mutex<Vec<u64>> = std::sync::Mutex::new(Vec::new());

/// A handler of the C convention's most arguments: it records them all
/// (the ones past the operation's are whatever the stack holds there and
/// are not compared) and answers the sum of its in longs.
#[allow(clippy::too_many_arguments)]
extern "C" fn many_args(
    _ctx: *mut u8,
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
) -> i64 {
    let all = vec![
        a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19,
        a20, a21, a22, a23, a24, a25, a26, a27, a28, a29, a30,
    ];
    *MANY_SEEN.lock().unwrap_or_else(|e| e.into_inner()) = all;
    // The one operation registered with it ends with an out string: its
    // room and its count word are the last two arguments (19 and 20).
    // SAFETY: the room has capacity `*a20` bytes (at least 2: the area is
    // far larger than the record).
    unsafe {
        let n = a20 as *mut u32;
        if *n >= 2 {
            std::ptr::copy_nonoverlapping(b"ok".as_ptr(), a19 as *mut u8, 2);
            *n = 2;
        }
    }
    0
}

#[test]
fn handler_arguments_past_the_registers_are_passed_on_the_stack() {
    // 14 in longs (one value each), an in string and an in sequence (two
    // each), an inout long and an out string (a pointer each, two): 22
    // arguments besides the context, past the dispatch's nine registers.
    let longs: String = (0..14).map(|k| format!("in long x{k}, ")).collect();
    let src = format!(
        "interface m {{ void many({longs}in string s, in sequence<short> q, inout long io, out string o); }};"
    );
    let idl = idl::parse(&src).expect("parse");
    for engine in [Engine::Native, Engine::Reference] {
        let iface = Interface::from_idl(&idl, "m", Default::default(), engine).expect("load");
        // SAFETY: `many_args` takes the context and 31 integer arguments,
        // at least the operation's (docs/idl.md's handler conventions).
        let server = unsafe {
            iface.server(&[(
                "many",
                Handler::new(many_args as *const () as usize, std::ptr::null_mut()),
            )])
        }
        .expect("a server for a handler of 22 arguments");
        let mut t = dyn_loop(&server);
        let mut args: Vec<Value> = (0..14).map(|k| Value::I32(-1000 - k)).collect();
        args.push(Value::Str("héllo".into()));
        args.push(Value::Seq(Seq::I16(vec![7, -8, 9])));
        args.push(Value::I32(77));
        args.push(Value::Void);
        iface
            .client()
            .call(&mut t, 0, &mut args)
            .unwrap_or_else(|e| panic!("{engine:?}: {e}"));
        let seen = MANY_SEEN.lock().unwrap_or_else(|e| e.into_inner()).clone();
        // In longs: the value, as C's int (the low 32 bits).
        for (k, &x) in seen.iter().enumerate().take(14) {
            assert_eq!(x as u32 as i32, -1000 - k as i32, "{engine:?}: x{k}");
        }
        // The string: its private copy and length; the sequence: its
        // elements in the area and count.
        // SAFETY: pointers the dispatch passed, valid for these lengths
        // until the next request (none came since).
        let (s, q) = unsafe {
            (
                std::slice::from_raw_parts(seen[14] as *const u8, seen[15] as usize).to_vec(),
                std::slice::from_raw_parts(seen[16] as *const i16, seen[17] as usize).to_vec(),
            )
        };
        assert_eq!(s, "héllo".as_bytes(), "{engine:?}");
        assert_eq!(q, [7, -8, 9], "{engine:?}");
        // The inout long: a pointer to its field, holding the value sent.
        // SAFETY: a pointer into the loop's record.
        assert_eq!(unsafe { *(seen[18] as *const i32) }, 77, "{engine:?}");
        // The out string's room and its count word: the text written there
        // came back.
        assert!(
            args[17] == Value::Str("ok".into()),
            "{engine:?}: the out string"
        );
        assert_eq!(args[16], Value::I32(77), "{engine:?}");
    }
}

/// A server that replies and closes at once leaves the reply to the
/// client (`REPLY | REPLY_CLOSED`); the generated call takes it, and its
/// next call finds the channel closed instead of posting over the mark
/// and waiting for a server that has gone (which liveness then reports
/// as dead, the wrong error).
#[test]
fn the_generated_call_takes_a_reply_posted_before_the_close_and_then_stops() {
    use idl::rt::shm;
    const T: &str = "interface t { void ping(); };";
    for round in 0..20 {
        let (mut client, mut server_end) = shm::pair(&shm::Config {
            spin: 0,
            area: 4096,
            ..shm::Config::default()
        })
        .expect("shm pair");
        std::thread::spawn(move || {
            server_end.wait().expect("the request");
            server_end
                .reply(Status::Ok, 0, 0..0)
                .expect("the reply posts");
            drop(server_end); // closes, the client perhaps not yet awake
        });
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let iface = Interface::load(T, "t").expect("load");
            let ping = iface.op_index("ping").expect("op");
            let mut c = iface.client();
            let first = c.call(&mut client, ping, &mut []).map(|_| ());
            let second = c.call(&mut client, ping, &mut []).map(|_| ());
            let _ = tx.send((first, second));
        });
        match rx.recv_timeout(std::time::Duration::from_secs(20)) {
            Ok((Ok(()), Err(CallError::Transport(RtError::Closed)))) => {}
            Ok((first, second)) => panic!(
                "round {round}: the reply before the close: {first:?}; the call after it: {second:?}"
            ),
            Err(_) => panic!("round {round}: the second call hung on a closed channel"),
        }
    }
}
