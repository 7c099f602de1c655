//! C interop: the C stubs of `idl::gen_c`, compiled with gcc at test time,
//! against each other and against the Rust run time (docs/idl.md,
//! "Generated C").
//!
//! - C to C: `tests/c/{pfs,kinds}_test.c` fork a server and call it, each
//!   call checked against the same call made locally;
//! - a C client against a Rust server (the generated Rust stubs of the same
//!   IDL, checked in as `tests/idl/pfs.rs` and `tests/c/kinds_gen.rs`; the
//!   channel is made with `idl::rt::shm` and its memfd inherited by the C
//!   program), the C client checking each reply against its local C
//!   implementation;
//! - a Rust client against a C server, each reply checked against the Rust
//!   implementation of the same semantics;
//! - a hostile Rust client (raw requests through `idl::rt::shm`) against
//!   a C server: every request gets a status or a correct reply, the server
//!   never crashes (under valgrind when it is installed) and serves a good
//!   call afterwards.
//!
//! Without gcc the tests print why and pass, unless `IDL_REQUIRE_GCC=1`.

mod support;

use support::have_gcc;

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

use gen_kinds::kinds;
use gen_kinds::{Frame, Point, SCALE};
use gen_pfs::pfs;
use idl::model::{Op, Slot};
use idl::rt::shm::{self, ClientEnd, Config, ServerEnd};
use idl::rt::{CallError, ClientTransport, OutSeq, OutStr, Status};

const PFS_IDL: &str = include_str!("../idl/pfs.idl");
const KINDS_IDL: &str = include_str!("c/kinds.idl");

fn manifest() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn have_valgrind() -> bool {
    Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A fresh directory under the system's temp directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "idl-c-interop-{}-{tag}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("create the temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Generates `<stem>.h` / `<stem>.c` from `idl_src` and compiles them with
/// the run time and `tests/c/<main>` into an executable, warnings as errors
/// (-Wall -Wextra -Werror): generated C must compile cleanly.
fn build(dir: &TempDir, stem: &str, idl_src: &str, main: &str) -> PathBuf {
    let idl = idl::parse(idl_src).unwrap_or_else(|e| panic!("{stem}.idl: {e}"));
    let (h, c) = idl::gen_c::generate(&idl, stem);
    std::fs::write(dir.0.join(format!("{stem}.h")), h).expect("write the header");
    std::fs::write(dir.0.join(format!("{stem}.c")), c).expect("write the source");
    let exe = dir.0.join(main.trim_end_matches(".c"));
    support::gcc_with_rt(main, &[dir.0.join(format!("{stem}.c"))], &exe);
    exe
}

fn check_output(what: &str, out: &Output) {
    assert!(
        out.status.success(),
        "{what} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Spawns `exe mode FD args...` with the channel's `memfd` inherited as FD;
/// under valgrind (errors fail the exit status) if `valgrind` is set.
fn spawn(exe: &Path, mode: &str, fd: &OwnedFd, args: &[&str], valgrind: bool) -> Child {
    let inherited = shm::inheritable(fd).expect("an inheritable memfd");
    let n = inherited.as_raw_fd().to_string();
    let mut cmd = if valgrind {
        let mut c = Command::new("valgrind");
        c.args(["-q", "--error-exitcode=1", "--leak-check=no"])
            .arg(exe);
        c
    } else {
        Command::new(exe)
    };
    let child = cmd
        .arg(mode)
        .arg(&n)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn the C program");
    drop(inherited);
    child
}

fn op<'a>(idl: &'a idl::Idl, name: &str) -> &'a Op {
    idl.interfaces[0]
        .ops
        .iter()
        .find(|o| o.name == name)
        .unwrap_or_else(|| panic!("no operation {name}"))
}

/// The byte offset of parameter `param` (or the return value, `None`) in
/// `op`'s record.
fn offset(op: &Op, param: Option<&str>) -> usize {
    let slot = match param {
        Some(p) => Slot::Param(
            op.params
                .iter()
                .position(|q| q.name == p)
                .unwrap_or_else(|| panic!("no parameter {p}")),
        ),
        None => Slot::Ret,
    };
    op.layout
        .field(slot)
        .unwrap_or_else(|| panic!("{param:?} has no field"))
        .offset as usize
}

fn desc(buf: &mut [u8], at: usize, off: u32, len: u32) {
    buf[at..at + 4].copy_from_slice(&off.to_ne_bytes());
    buf[at + 4..at + 8].copy_from_slice(&len.to_ne_bytes());
}

/// A small deterministic generator (xorshift64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

// ---- the generated Rust of the same interfaces ------------------------------

#[allow(dead_code)]
mod gen_pfs {
    // The same file tests/roundtrip.rs uses and keeps current.
    include!("idl/pfs.rs");
}

#[allow(dead_code)]
mod gen_kinds {
    include!("c/kinds_gen.rs");
}

/// The Rust stubs of kinds.idl are checked in (as tests/roundtrip.rs does
/// for pfs.idl, whose file this test shares); this checks that they are
/// what the generator makes today, and
/// `IDL_BLESS=1` rewrites them (if an edited IDL makes the test itself no
/// longer compile, bless with the test as it was, then edit it).
#[test]
fn generated_rust_is_current() {
    for (src, rs) in [(KINDS_IDL, "tests/c/kinds_gen.rs")] {
        let model = idl::parse(src).unwrap_or_else(|e| panic!("{rs}: {e}"));
        let now = idl::gen_rust::generate(&model);
        let path = manifest().join(rs);
        if std::env::var_os("IDL_BLESS").is_some() {
            std::fs::write(&path, &now).expect("write the generated code");
            continue;
        }
        let old = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(old == now, "{rs} is stale: rerun with IDL_BLESS=1");
    }
}

// ---- C to C ---------------------------------------------------------------

/// Whether `tool` (a compiler) runs; without it a test returns early, or
/// fails if `IDL_REQUIRE_GCC=1`.
fn have(tool: &str, test: &str) -> bool {
    let ok = Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        if std::env::var("IDL_REQUIRE_GCC").is_ok_and(|v| v == "1") {
            panic!("{test}: {tool} is not installed and IDL_REQUIRE_GCC=1");
        }
        eprintln!("{test}: skipped: {tool} is not installed");
    }
    ok
}

/// A generated header is usable from C++ as well as C: included by a C++17
/// translation unit it compiles without a warning (its `extern "C"` guards,
/// and its layout assertions as C++'s `static_assert`, which still hold),
/// and the generated C source still compiles as C11, for every IDL file of
/// the tests (every kind of type, the paper's pfs).
#[test]
fn generated_headers_compile_as_cpp_and_as_c() {
    if !have("gcc", "generated_headers_compile_as_cpp_and_as_c")
        || !have("g++", "generated_headers_compile_as_cpp_and_as_c")
    {
        return;
    }
    let every = std::fs::read_to_string(manifest().join("tests/idl/every.idl")).unwrap();
    for (stem, src) in [
        ("every", every.as_str()),
        ("kinds", KINDS_IDL),
        ("pfs", PFS_IDL),
    ] {
        let dir = TempDir::new(&format!("cxx-{stem}"));
        let idl = idl::parse(src).unwrap_or_else(|e| panic!("{stem}.idl: {e}"));
        let (h, c) = idl::gen_c::generate(&idl, stem);
        std::fs::write(dir.0.join(format!("{stem}.h")), h).unwrap();
        std::fs::write(dir.0.join(format!("{stem}.c")), c).unwrap();
        let cpp = dir.0.join("user.cpp");
        std::fs::write(
            &cpp,
            format!(
                "#include \"{stem}.h\"\n#include <cstdio>\n\
                 int main() {{ std::printf(\"%zu\\n\", sizeof(idl_desc)); return 0; }}\n"
            ),
        )
        .unwrap();
        let rt = manifest().join("c");
        for (compiler, std, file) in [
            ("g++", "-std=c++17", cpp.clone()),
            ("gcc", "-std=c11", dir.0.join(format!("{stem}.c"))),
            ("gcc", "-std=c11", rt.join("idl_rt.c")),
        ] {
            let out = Command::new(compiler)
                .args([std, "-Wall", "-Wextra", "-Werror", "-c", "-o"])
                .arg(dir.0.join("out.o"))
                .arg("-I")
                .arg(&rt)
                .arg("-I")
                .arg(&dir.0)
                .arg(&file)
                .output()
                .expect("run the compiler");
            assert!(
                out.status.success(),
                "{compiler} {std} failed on {} ({stem}.idl):\n{}",
                file.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

#[test]
fn c_to_c_pfs() {
    if !have_gcc("c_to_c_pfs") {
        return;
    }
    let dir = TempDir::new("pfs");
    let exe = build(&dir, "pfs", PFS_IDL, "pfs_test.c");
    let out = Command::new(&exe)
        .args(["c2c", "300"])
        .output()
        .expect("run");
    check_output("pfs_test c2c", &out);
}

#[test]
fn c_to_c_kinds() {
    if !have_gcc("c_to_c_kinds") {
        return;
    }
    let dir = TempDir::new("kinds");
    let exe = build(&dir, "kinds", KINDS_IDL, "kinds_test.c");
    let out = Command::new(&exe)
        .args(["c2c", "40"])
        .output()
        .expect("run");
    check_output("kinds_test c2c", &out);
}

// ---- a hostile Rust client against a C server ------------------------------

/// A raw call: `record` as the request of `key`; the reply's status.
fn raw(c: &mut ClientEnd, key: u16, record: &[u8]) -> Result<Vec<u8>, Status> {
    match c.call_raw(key, record) {
        Ok(r) => Ok(r.to_vec()),
        Err(CallError::Status(s)) => Err(s),
        Err(e) => panic!("key {key}, {} bytes: not a status: {e}", record.len()),
    }
}

/// Random requests: random keys (known and unknown), lengths and bytes,
/// with descriptors that sometimes point into the area; each answer must be
/// a status or a reply.
fn random_requests(c: &mut ClientEnd, keys: u16, n: usize, seed: u64) {
    let mut rng = Rng(seed);
    let area = c.area_len() as u64;
    for _ in 0..n {
        let key = rng.below(u64::from(keys) + 2) as u16;
        let len = rng.below(c.capacity().min(256) as u64 + 1) as usize;
        let mut rec: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        // Make some words plausible descriptors and booleans.
        for at in (0..len.saturating_sub(8)).step_by(4) {
            match rng.below(6) {
                0 => desc(
                    &mut rec,
                    at,
                    rng.below(area + 16) as u32,
                    rng.below(64) as u32,
                ),
                1 => rec[at] = rng.below(3) as u8,
                _ => {}
            }
        }
        c.begin();
        if rng.below(2) == 0 {
            let junk: Vec<u8> = (0..rng.below(200)).map(|_| rng.next() as u8).collect();
            let _ = c.put(&junk, 1);
        }
        let _ = raw(c, key, &rec);
    }
}

/// Runs `exe server` on a fresh channel (under valgrind if installed),
/// hands the client end to `f`, then closes the channel and checks that
/// the server exited cleanly.
fn against_c_server(exe: &Path, f: impl FnOnce(&mut ClientEnd)) {
    let fd = shm::create(&Config {
        area: 1 << 20,
        ..Config::default()
    })
    .expect("create a channel");
    let mut client = ClientEnd::from_fd(fd.try_clone().expect("dup")).expect("client end");
    let valgrind = have_valgrind();
    eprintln!(
        "{}: the C server runs {}",
        exe.display(),
        if valgrind {
            "under valgrind"
        } else {
            "without valgrind (not installed)"
        }
    );
    let child = spawn(exe, "server", &fd, &[], valgrind);
    drop(fd);
    f(&mut client);
    drop(client);
    let out = child.wait_with_output().expect("wait for the server");
    check_output("the C server", &out);
}

#[test]
fn hostile_client_against_c_pfs_server() {
    if !have_gcc("hostile_client_against_c_pfs_server") {
        return;
    }
    let dir = TempDir::new("pfs-hostile");
    let exe = build(&dir, "pfs", PFS_IDL, "pfs_test.c");
    let idl = idl::parse(PFS_IDL).expect("pfs.idl");
    let write = op(&idl, "pfs_write");
    let data = offset(write, Some("data"));
    let size = write.layout.size as usize;
    against_c_server(&exe, |c| {
        // Unknown key; short request.
        assert_eq!(raw(c, 3, &[0; 64]), Err(Status::BadKey));
        assert_eq!(raw(c, 0xffff, &[]), Err(Status::BadKey));
        assert_eq!(
            raw(
                c,
                write.key,
                &vec![0; write.layout.request_size as usize - 1]
            ),
            Err(Status::ShortMessage)
        );
        let area = c.area_len() as u32;
        let mut rec = vec![0u8; size];
        // Descriptors out of the area, misaligned, over the limit, or
        // wrapping around.
        for (off, len) in [
            (area, 1),
            (area - 4, 2),
            (2, 1),
            (0, (2 << 20) / 4 + 1),
            (u32::MAX - 3, 2),
            (4, u32::MAX),
        ] {
            desc(&mut rec, data, off, len);
            assert_eq!(
                raw(c, write.key, &rec[..write.layout.request_size as usize]),
                Err(Status::BadString),
                "descriptor ({off}, {len})"
            );
        }
        random_requests(c, 3, 3000, 0x5eed_c0de);
        // Still serving: a good call (handle 0, pos 5, 2 words).
        c.begin();
        let off = c.put(&[7u8, 0, 0, 0, 9, 0, 0, 0], 4).expect("put");
        rec.fill(0);
        let pos = offset(write, Some("pos"));
        rec[pos..pos + 4].copy_from_slice(&5i32.to_ne_bytes());
        desc(&mut rec, data, off, 2);
        let reply =
            raw(c, write.key, &rec[..write.layout.request_size as usize]).expect("a good call");
        let ret = offset(write, None);
        assert_eq!(reply[pos..pos + 4], 7i32.to_ne_bytes());
        assert_eq!(reply[ret..ret + 4], 2i32.to_ne_bytes());
    });
}

#[test]
fn hostile_client_against_c_kinds_server() {
    if !have_gcc("hostile_client_against_c_kinds_server") {
        return;
    }
    let dir = TempDir::new("kinds-hostile");
    let exe = build(&dir, "kinds", KINDS_IDL, "kinds_test.c");
    let idl = idl::parse(KINDS_IDL).expect("kinds.idl");
    let scalars = op(&idl, "scalars");
    let strings = op(&idl, "strings");
    let seqs = op(&idl, "seqs");
    let corba = op(&idl, "corba");
    against_c_server(&exe, |c| {
        // A boolean other than 0 or 1.
        let mut rec = vec![0u8; scalars.layout.size as usize];
        rec[offset(scalars, Some("flag"))] = 2;
        let req = scalars.layout.request_size as usize;
        assert_eq!(raw(c, scalars.key, &rec[..req]), Err(Status::BadValue));
        rec[offset(scalars, Some("flag"))] = 1;
        assert!(raw(c, scalars.key, &rec[..req]).is_ok());

        // A string that is not UTF-8; strings out of order.
        let req = strings.layout.request_size as usize;
        let mut rec = vec![0u8; strings.layout.size as usize];
        c.begin();
        let bad = c.put(&[b'a', 0xff, b'b'], 1).expect("put");
        let good = c.put(b"ok", 1).expect("put");
        desc(&mut rec, offset(strings, Some("s")), bad, 3);
        desc(&mut rec, offset(strings, Some("t")), good, 2);
        assert_eq!(raw(c, strings.key, &rec[..req]), Err(Status::BadValue));
        desc(&mut rec, offset(strings, Some("s")), good, 2);
        desc(&mut rec, offset(strings, Some("t")), bad, 3);
        assert_eq!(raw(c, strings.key, &rec[..req]), Err(Status::BadString));
        desc(&mut rec, offset(strings, Some("t")), good, 2);
        assert_eq!(
            raw(c, strings.key, &rec[..req]),
            Err(Status::BadString),
            "two descriptors over the same bytes"
        );

        // A misaligned sequence of shorts; overlapping sequences.
        let req = seqs.layout.request_size as usize;
        let mut rec = vec![0u8; seqs.layout.size as usize];
        desc(&mut rec, offset(seqs, Some("a")), 1, 2);
        assert_eq!(raw(c, seqs.key, &rec[..req]), Err(Status::BadString));
        desc(&mut rec, offset(seqs, Some("a")), 0, 8);
        desc(&mut rec, offset(seqs, Some("d")), 8, 4);
        assert_eq!(raw(c, seqs.key, &rec[..req]), Err(Status::BadString));

        random_requests(c, 7, 3000, 0xbad_5eed);

        // Still serving: corba(3, 4) -> y 7, z 6, ret -4.
        let mut rec = vec![0u8; corba.layout.size as usize];
        let (x, y) = (offset(corba, Some("x")), offset(corba, Some("y")));
        rec[x..x + 4].copy_from_slice(&3i32.to_ne_bytes());
        rec[y..y + 4].copy_from_slice(&4i32.to_ne_bytes());
        let reply = raw(c, corba.key, &rec[..corba.layout.request_size as usize]).expect("corba");
        let (z, r) = (offset(corba, Some("z")), offset(corba, None));
        assert_eq!(reply[y..y + 4], 7i32.to_ne_bytes());
        assert_eq!(reply[z..z + 2], 6u16.to_ne_bytes());
        assert_eq!(reply[r..r + 4], (-4i32).to_ne_bytes());
    });
}

// ---- the semantics of the test interfaces, in Rust ------------------------
//
// The same as tests/c/{pfs,kinds}_test.c: a C client checks a Rust server
// against its local C implementation, and a Rust client checks a C server
// against these functions.

const FILES: usize = 4;
const FILE_WORDS: usize = 16384;

/// The toy file server of pfs_test.c.
struct Pfs {
    words: Vec<[i32; FILE_WORDS]>,
}

impl Pfs {
    fn new() -> Pfs {
        Pfs {
            words: vec![[0; FILE_WORDS]; FILES],
        }
    }

    fn open(client: i32, fobj: i32, flags: i32, mode: i32, handle: &mut i32) -> i32 {
        *handle = ((client as u32 ^ fobj as u32) % FILES as u32) as i32;
        if flags == -1 {
            -1
        } else {
            mode.wrapping_add(flags)
        }
    }

    fn write(&mut self, handle: i32, pos: &mut i32, len: i32, data: &[i32]) -> i32 {
        if !(0..FILES as i32).contains(&handle) || *pos < 0 {
            return -1;
        }
        let mut n = 0i32;
        for &d in data {
            if *pos as usize >= FILE_WORDS {
                break;
            }
            self.words[handle as usize][*pos as usize] = d;
            *pos += 1;
            n += 1;
        }
        n.wrapping_add(len)
    }

    /// Reads up to `count` words (and at most `room`) from `pos` into `push`.
    fn read(
        &mut self,
        handle: i32,
        pos: &mut i32,
        count: i32,
        room: usize,
        mut push: impl FnMut(i32),
    ) -> i32 {
        if !(0..FILES as i32).contains(&handle) || *pos < 0 || count < 0 {
            return -1;
        }
        let mut n = 0i32;
        while n < count && (n as usize) < room && (*pos as usize) < FILE_WORDS {
            push(self.words[handle as usize][*pos as usize]);
            *pos += 1;
            n += 1;
        }
        n
    }
}

impl pfs::Server for Pfs {
    fn pfs_open(&mut self, client: i32, fobj: i32, flags: i32, mode: i32, handle: &mut i32) -> i32 {
        Pfs::open(client, fobj, flags, mode, handle)
    }

    fn pfs_write(&mut self, handle: i32, pos: &mut i32, len: i32, data: &[i32]) -> i32 {
        self.write(handle, pos, len, data)
    }

    fn pfs_get_direntries(
        &mut self,
        handle: i32,
        pos: &mut i32,
        count: i32,
        data: &mut OutSeq<'_, i32>,
    ) -> i32 {
        let room = data.capacity();
        self.read(handle, pos, count, room, |w| {
            let _ = data.push(w);
        })
    }
}

fn point(x: i16, y: i64) -> Point {
    Point {
        x,
        y,
        ..Point::default()
    }
}

/// The kinds server of kinds_test.c; its methods on plain values are the
/// local reference of the Rust client.
#[derive(Default)]
struct Kinds {
    nothing: u64,
}

#[allow(clippy::too_many_arguments)]
fn scalars_ref(
    c8: u8,
    u8_: u8,
    i16_: i16,
    u16_: u16,
    i32_: i32,
    u32_: u32,
    i64_: i64,
    u64_: u64,
    flag: bool,
    acc: &mut i64,
    flipped: &mut bool,
) -> bool {
    let a = [
        *acc as u64,
        u64::from(c8),
        u64::from(u8_),
        i64::from(i16_) as u64,
        u64::from(u16_),
        i64::from(i32_) as u64,
        u64::from(u32_),
        i64_ as u64,
        u64_,
        u64::from(flag),
    ]
    .iter()
    .fold(0u64, |s, &x| s.wrapping_add(x));
    *acc = a as i64;
    *flipped = !flag;
    (u64_ ^ i64_ as u64) & 1 == 1
}

fn structs_ref(p: Point, bx: &mut Frame, q: &mut Point) -> Point {
    bx.corner.x = bx.corner.x.wrapping_add(p.x);
    bx.corner.y ^= p.y;
    for (i, t) in bx.tag.iter_mut().enumerate() {
        *t = t.wrapping_add(i as u8 + 1);
    }
    bx.n = bx.n.wrapping_mul(SCALE as u32).wrapping_add(1);
    *q = point(p.y as i16, i64::from(p.x));
    point(bx.n as i16, p.y.wrapping_sub(1))
}

fn arrays_ref(a: [i16; 3], b: &mut [i32; 2], c: &mut [u8; 5]) {
    for i in 0..2 {
        b[i] = b[i].wrapping_mul(2).wrapping_add(i32::from(a[i]));
    }
    for (j, x) in c.iter_mut().enumerate() {
        *x = (i32::from(a[0]) + j as i32) as u8;
    }
}

/// `t` holds the old value on entry; returns the reply's `ret`.
fn strings_ref(s: &str, t: &mut String, u: &mut String) -> u32 {
    let ret = (s.len() * 1000 + t.len()) as u32;
    t.push_str(s);
    *u = s.to_ascii_uppercase();
    ret
}

fn seqs_ref(
    a: &[i16],
    b: &mut [i64],
    mut c: impl FnMut(Point),
    d: &[u8],
    mut e: impl FnMut(i32),
) -> i32 {
    let sa: i64 = a.iter().map(|&x| i64::from(x)).sum();
    for (i, x) in b.iter_mut().enumerate() {
        *x = x.wrapping_add(sa).wrapping_add(i as i64);
    }
    for (i, &x) in a.iter().enumerate() {
        c(point(x, i as i64));
    }
    for &x in d {
        e(i32::from(x) * 3);
    }
    let sd: u32 = d.iter().map(|&x| u32::from(x)).sum();
    sd.wrapping_add(a.len() as u32) as i32
}

fn corba_ref(x: i32, y: &mut i32, z: &mut u16, bit: &mut bool, small: i8) -> i32 {
    *y = y.wrapping_add(x);
    *z = (x as u32).wrapping_mul(2) as u16;
    *bit = *bit == (small < 0);
    x.wrapping_sub(*y).wrapping_add(i32::from(small))
}

impl kinds::Server for Kinds {
    fn nothing(&mut self) {
        self.nothing += 1;
    }

    fn scalars(
        &mut self,
        c8: u8,
        u8: u8,
        i16: i16,
        u16: u16,
        i32: i32,
        u32: u32,
        i64: i64,
        u64: u64,
        flag: bool,
        acc: &mut i64,
        flipped: &mut bool,
    ) -> bool {
        scalars_ref(c8, u8, i16, u16, i32, u32, i64, u64, flag, acc, flipped)
    }

    fn structs(&mut self, p: Point, bx: &mut Frame, q: &mut Point) -> Point {
        structs_ref(p, bx, q)
    }

    fn arrays(&mut self, a: [i16; 3], b: &mut [i32; 2], c: &mut [u8; 5]) {
        arrays_ref(a, b, c)
    }

    fn strings(&mut self, s: &str, t: &mut OutStr<'_>, u: &mut OutStr<'_>) -> u32 {
        let ret = (s.len() * 1000 + t.len()) as u32;
        let _ = t.push_str(s);
        let _ = u.push_str(&s.to_ascii_uppercase());
        ret
    }

    fn seqs(
        &mut self,
        a: &[i16],
        b: &mut [i64],
        c: &mut OutSeq<'_, Point>,
        d: &[u8],
        e: &mut OutSeq<'_, i32>,
    ) -> i32 {
        seqs_ref(
            a,
            b,
            |p| {
                let _ = c.push(p);
            },
            d,
            |x| {
                let _ = e.push(x);
            },
        )
    }

    fn corba(&mut self, x: i32, y: &mut i32, z: &mut u16, bit: &mut bool, small: i8) -> i32 {
        corba_ref(x, y, z, bit, small)
    }
}

// ---- C client, Rust server -------------------------------------------------

/// Serves `server` with `serve` on a thread while `exe client FD CALLS`
/// runs; closes the channel when the client has exited (so that a client
/// that died does not leave the server waiting) and checks both.
fn c_client_against(
    exe: &Path,
    calls: &str,
    server: ServerEnd,
    serve: impl FnOnce(ServerEnd) -> Result<(), CallError> + Send + 'static,
) {
    let closer = server.fd().try_clone().expect("dup");
    let child = spawn(exe, "client", server.fd(), &[calls], false);
    let t = std::thread::spawn(move || serve(server));
    let out = child.wait_with_output().expect("wait for the C client");
    drop(ClientEnd::from_fd(closer).expect("map the channel to close it"));
    t.join()
        .expect("the server thread")
        .expect("the Rust server loop");
    check_output("the C client", &out);
}

#[test]
fn c_client_rust_server_pfs() {
    if !have_gcc("c_client_rust_server_pfs") {
        return;
    }
    let dir = TempDir::new("pfs-c2r");
    let exe = build(&dir, "pfs", PFS_IDL, "pfs_test.c");
    let server = ServerEnd::create(&Config::default()).expect("create a channel");
    c_client_against(&exe, "200", server, |mut s| {
        pfs::serve(&mut Pfs::new(), &mut s)
    });
}

#[test]
fn c_client_rust_server_kinds() {
    if !have_gcc("c_client_rust_server_kinds") {
        return;
    }
    let dir = TempDir::new("kinds-c2r");
    let exe = build(&dir, "kinds", KINDS_IDL, "kinds_test.c");
    let server = ServerEnd::create(&Config::default()).expect("create a channel");
    c_client_against(&exe, "40", server, |mut s| {
        let mut k = Kinds::default();
        kinds::serve(&mut k, &mut s)?;
        assert_eq!(k.nothing, 40, "every null call arrived");
        Ok(())
    });
}

// ---- Rust client, C server -------------------------------------------------

/// Runs `exe server FD` on a fresh channel, hands `f` the client end (with
/// a timeout, so that a dead server fails the test rather than hanging
/// it), then closes the channel and checks that the server exited cleanly.
fn rust_client_against(exe: &Path, f: impl FnOnce(&mut ClientEnd)) {
    let fd = shm::create(&Config::default()).expect("create a channel");
    let mut client = ClientEnd::from_fd(fd.try_clone().expect("dup")).expect("client end");
    client.set_timeout(Some(std::time::Duration::from_secs(30)));
    let child = spawn(exe, "server", &fd, &[], false);
    drop(fd);
    f(&mut client);
    drop(client);
    let out = child.wait_with_output().expect("wait for the C server");
    check_output("the C server", &out);
}

#[test]
fn rust_client_c_server_pfs() {
    if !have_gcc("rust_client_c_server_pfs") {
        return;
    }
    let dir = TempDir::new("pfs-r2c");
    let exe = build(&dir, "pfs", PFS_IDL, "pfs_test.c");
    rust_client_against(&exe, |c| {
        let mut local = Pfs::new();
        let mut rng = Rng(0x1234_5678_9abc_def1);
        let mut data = Vec::new();
        for k in 0..200 {
            let (client, fobj) = (rng.next() as i32, rng.next() as i32);
            let (flags, mode) = (rng.below(8) as i32 - 1, rng.below(512) as i32);
            let (mut h, mut h_l) = (0, 0);
            let r = pfs::pfs_open(c, client, fobj, flags, mode, &mut h).expect("pfs_open");
            assert_eq!(
                (r, h),
                (Pfs::open(client, fobj, flags, mode, &mut h_l), h_l),
                "call {k}"
            );

            let n = if k % 5 == 4 {
                4096
            } else {
                rng.below(300) as usize
            };
            let words: Vec<i32> = (0..n).map(|_| rng.next() as i32).collect();
            let mut pos = rng.below(FILE_WORDS as u64) as i32;
            let mut pos_l = pos;
            let len = n as i32 * 4;
            let r = pfs::pfs_write(c, h, &mut pos, len, &words).expect("pfs_write");
            assert_eq!(
                (r, pos),
                (local.write(h, &mut pos_l, len, &words), pos_l),
                "call {k}"
            );

            let count = rng.below(2000) as i32;
            let mut pos = rng.below(FILE_WORDS as u64) as i32;
            let mut pos_l = pos;
            let r = pfs::pfs_get_direntries(c, h, &mut pos, count, &mut data)
                .expect("pfs_get_direntries");
            let mut want = Vec::new();
            let r_l = local.read(h, &mut pos_l, count, usize::MAX, |w| want.push(w));
            assert_eq!((r, pos, &data), (r_l, pos_l, &want), "call {k}");
        }
    });
}

#[test]
fn rust_client_c_server_kinds() {
    if !have_gcc("rust_client_c_server_kinds") {
        return;
    }
    let dir = TempDir::new("kinds-r2c");
    let exe = build(&dir, "kinds", KINDS_IDL, "kinds_test.c");
    rust_client_against(&exe, |c| {
        let mut rng = Rng(0xfeed_f00d_1234_5678);
        let text = |rng: &mut Rng, n: u64| -> String {
            let pieces = ["a", "z", "Q", " ", "0", "é", "€", "😀"];
            (0..rng.below(n))
                .map(|_| pieces[rng.below(8) as usize])
                .collect()
        };
        let xy = |p: &Point| (p.x, p.y);
        let (mut cs, mut es) = (Vec::new(), Vec::new());
        for k in 0..40 {
            kinds::nothing(c).expect("nothing");

            let v: Vec<u64> = (0..9).map(|_| rng.next()).collect();
            let (flag, mut acc) = (v[8] & 1 == 1, rng.next() as i64);
            let (mut acc_l, mut fl, mut fl_l) = (acc, false, false);
            let r = kinds::scalars(
                c,
                v[0] as u8,
                v[1] as u8,
                v[2] as i16,
                v[3] as u16,
                v[4] as i32,
                v[5] as u32,
                v[6] as i64,
                v[7],
                flag,
                &mut acc,
                &mut fl,
            )
            .expect("scalars");
            let r_l = scalars_ref(
                v[0] as u8,
                v[1] as u8,
                v[2] as i16,
                v[3] as u16,
                v[4] as i32,
                v[5] as u32,
                v[6] as i64,
                v[7],
                flag,
                &mut acc_l,
                &mut fl_l,
            );
            assert_eq!((r, acc, fl), (r_l, acc_l, fl_l), "scalars, call {k}");

            let p = point(rng.next() as i16, rng.next() as i64);
            let mut bx = Frame {
                corner: point(rng.next() as i16, rng.next() as i64),
                tag: [1, 2, 3],
                n: rng.next() as u32,
                ..Frame::default()
            };
            let mut bx_l = bx;
            let (mut q, mut q_l) = (Point::default(), Point::default());
            let r = kinds::structs(c, p, &mut bx, &mut q).expect("structs");
            let r_l = structs_ref(p, &mut bx_l, &mut q_l);
            assert_eq!((xy(&r), xy(&q)), (xy(&r_l), xy(&q_l)), "structs, call {k}");
            assert_eq!(
                (xy(&bx.corner), bx.tag, bx.n),
                (xy(&bx_l.corner), bx_l.tag, bx_l.n),
                "structs, call {k}"
            );

            let a = [rng.next() as i16, rng.next() as i16, rng.next() as i16];
            let mut b = [rng.next() as i32, rng.next() as i32];
            let mut b_l = b;
            let (mut cc, mut cc_l) = ([0u8; 5], [0u8; 5]);
            kinds::arrays(c, a, &mut b, &mut cc).expect("arrays");
            arrays_ref(a, &mut b_l, &mut cc_l);
            assert_eq!((b, cc), (b_l, cc_l), "arrays, call {k}");

            let s = text(&mut rng, 40);
            let mut t = text(&mut rng, 20);
            let mut t_l = t.clone();
            let (mut u, mut u_l) = (String::new(), String::new());
            let r = kinds::strings(c, &s, &mut t, &mut u).expect("strings");
            let r_l = strings_ref(&s, &mut t_l, &mut u_l);
            assert_eq!((r, &t, &u), (r_l, &t_l, &u_l), "strings, call {k}");

            let an = if k % 4 == 3 { 50_000 } else { rng.below(40) };
            let a: Vec<i16> = (0..an).map(|_| rng.next() as i16).collect();
            let mut b: Vec<i64> = (0..rng.below(30)).map(|_| rng.next() as i64).collect();
            let mut b_l = b.clone();
            let d: Vec<u8> = (0..rng.below(100)).map(|_| rng.next() as u8).collect();
            let r = kinds::seqs(c, &a, &mut b, &mut cs, &d, &mut es).expect("seqs");
            let (mut cs_l, mut es_l) = (Vec::new(), Vec::new());
            let r_l = seqs_ref(&a, &mut b_l, |p| cs_l.push(p), &d, |x| es_l.push(x));
            assert_eq!((r, &b, &es), (r_l, &b_l, &es_l), "seqs, call {k}");
            assert!(cs.iter().map(xy).eq(cs_l.iter().map(xy)), "seqs, call {k}");

            let x = rng.next() as i32;
            let mut y = rng.next() as i32;
            let mut y_l = y;
            let (mut z, mut z_l) = (0, 0);
            let mut bit = rng.next() & 1 == 1;
            let mut bit_l = bit;
            let small = rng.next() as i8;
            let r = kinds::corba(c, x, &mut y, &mut z, &mut bit, small).expect("corba");
            let r_l = corba_ref(x, &mut y_l, &mut z_l, &mut bit_l, small);
            assert_eq!((r, y, z, bit), (r_l, y_l, z_l, bit_l), "corba, call {k}");
        }
    });
}

// ---- the C run time's checks against the Rust run time's ------------------

/// `idl_utf8` accepts exactly what `str::from_utf8` accepts: random byte
/// strings biased to the edges of UTF-8 (overlong forms, surrogates, code
/// points past U+10FFFF, truncated sequences).
#[test]
fn c_utf8_check_is_rusts() {
    if !have_gcc("c_utf8_check_is_rusts") {
        return;
    }
    let dir = TempDir::new("utf8");
    let rt = manifest().join("c");
    let exe = dir.0.join("utf8_test");
    let out = Command::new("gcc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", "-I"])
        .arg(&rt)
        .arg(manifest().join("tests/c/utf8_test.c"))
        .arg(rt.join("idl_rt.c"))
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("run gcc");
    check_output("gcc utf8_test.c", &out);
    let edges = [
        0x00u8, 0x41, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xdf, 0xe0, 0xe1,
        0xec, 0xed, 0xee, 0xef, 0xf0, 0xf1, 0xf3, 0xf4, 0xf5, 0xf8, 0xff,
    ];
    let mut rng = Rng(0x0075_7466_0038);
    let mut cases: Vec<Vec<u8>> = Vec::new();
    for _ in 0..20_000 {
        let n = rng.below(9) as usize;
        cases.push(
            (0..n)
                .map(|_| edges[rng.below(edges.len() as u64) as usize])
                .collect(),
        );
    }
    for s in [
        "",
        "abc",
        "é",
        "€",
        "😀",
        "\u{10ffff}",
        "\u{d7ff}",
        "\u{e000}",
    ] {
        cases.push(s.as_bytes().to_vec());
    }
    let mut input = Vec::new();
    for c in &cases {
        input.extend_from_slice(&(c.len() as u32).to_ne_bytes());
        input.extend_from_slice(c);
    }
    let mut child = Command::new(&exe)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run utf8_test");
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || {
        use std::io::Write as _;
        stdin.write_all(&input).expect("write the cases");
    });
    let out = child.wait_with_output().expect("wait for utf8_test");
    writer.join().expect("writer");
    check_output("utf8_test", &out);
    assert_eq!(out.stdout.len(), cases.len());
    for (c, &got) in cases.iter().zip(&out.stdout) {
        let want = std::str::from_utf8(c).is_ok();
        assert_eq!(got == b'1', want, "idl_utf8({c:02x?})");
    }
}

/// The same requests, hostile or not, get the same status from a C server
/// and from the generated Rust server: the C server stubs check lengths,
/// descriptors (range, alignment, order, limit), booleans and UTF-8 as
/// `rt::Request` does, in the same order.
#[test]
fn c_and_rust_servers_refuse_alike() {
    if !have_gcc("c_and_rust_servers_refuse_alike") {
        return;
    }
    let dir = TempDir::new("kinds-alike");
    let exe = build(&dir, "kinds", KINDS_IDL, "kinds_test.c");
    let config = Config {
        area: 1 << 16,
        ..Config::default()
    };
    let mut rust_server = ServerEnd::create(&config).expect("create a channel");
    let mut to_rust = rust_server.client().expect("client end");
    let t = std::thread::spawn(move || kinds::serve(&mut Kinds::default(), &mut rust_server));
    let fd = shm::create(&config).expect("create a channel");
    let mut to_c = ClientEnd::from_fd(fd.try_clone().expect("dup")).expect("client end");
    let child = spawn(&exe, "server", &fd, &[], false);
    drop(fd);
    for c in [&mut to_rust, &mut to_c] {
        c.set_timeout(Some(std::time::Duration::from_secs(30)));
    }

    let idl = idl::parse(KINDS_IDL).expect("kinds.idl");
    let ops = &idl.interfaces[0].ops;
    let area = to_c.area_len() as u64;
    let mut rng = Rng(0x000a_114e);
    let mut seen = std::collections::BTreeMap::new();
    for i in 0..6000 {
        let key = rng.below(ops.len() as u64 + 1) as u16;
        let (req, size) = ops.get(key as usize).map_or((16, 64), |o| {
            (o.layout.request_size as usize, o.layout.size as usize)
        });
        // Mostly the right length, sometimes one short.
        let len = if rng.below(8) == 0 {
            req.saturating_sub(1)
        } else {
            req
        };
        let mut rec = vec![0u8; size.max(len)];
        // Strings: a few values, some valid UTF-8, placed in order.
        let texts: Vec<Vec<u8>> = (0..3)
            .map(|_| {
                if rng.below(4) == 0 {
                    vec![b'x', 0xc3, 0x28]
                } else {
                    "héllo wörld".as_bytes()[..rng.below(13) as usize].to_vec()
                }
            })
            .collect();
        let mut offs = Vec::new();
        for c in [&mut to_rust, &mut to_c] {
            c.begin();
            offs.clear();
            for t in &texts {
                offs.push(c.put(t, 8).expect("put"));
            }
        }
        if let Some(o) = ops.get(key as usize) {
            let mut k = 0;
            for f in &o.layout.fields {
                if f.offset as usize + f.size as usize > len {
                    continue;
                }
                let at = f.offset as usize;
                if f.desc {
                    let (off, n) = match rng.below(6) {
                        0 => (rng.below(area + 64) as u32, rng.below(40) as u32),
                        1 => (offs[k % 3] + 1, 2),
                        2 => (0, rng.below(u64::from(u32::MAX)) as u32),
                        _ => (offs[k % 3], texts[k % 3].len() as u32 / 8),
                    };
                    desc(&mut rec, at, off, n);
                    k += 1;
                } else {
                    for b in &mut rec[at..at + f.size as usize] {
                        *b = if rng.below(3) == 0 {
                            rng.next() as u8
                        } else {
                            rng.below(2) as u8
                        };
                    }
                }
            }
        }
        let a = raw(&mut to_rust, key, &rec[..len]).map(|_| ());
        let b = raw(&mut to_c, key, &rec[..len]).map(|_| ());
        assert_eq!(a, b, "request {i}: key {key}, {len} bytes {rec:02x?}");
        *seen.entry(format!("{a:?}")).or_insert(0) += 1;
    }
    eprintln!("statuses: {seen:?}");
    assert!(
        seen.len() >= 4,
        "the requests hit too few statuses: {seen:?}"
    );
    drop(to_rust);
    drop(to_c);
    t.join()
        .expect("the Rust server")
        .expect("the Rust server loop");
    check_output("the C server", &child.wait_with_output().expect("wait"));
}

#[test]
fn dynamic_client_c_server_pfs() {
    // The dynamic stubs (loaded from the same IDL text at run time) make
    // each call in their generated code, transport included, against the
    // C server: the same shared-memory protocol, the same answers as the
    // local model.
    if !have_gcc("dynamic_client_c_server_pfs") {
        return;
    }
    use idl::dynamic::{Interface, Seq, Value};
    let dir = TempDir::new("pfs-d2c");
    let exe = build(&dir, "pfs", PFS_IDL, "pfs_test.c");
    let iface = Interface::load(PFS_IDL, "pfs").expect("the dynamic stubs load");
    let op = |name: &str| iface.op_index(name).expect("a pfs operation");
    let (open, write, dir_op) = (op("pfs_open"), op("pfs_write"), op("pfs_get_direntries"));
    if cfg!(target_arch = "x86_64") {
        assert!(iface.shm_listing(write).is_some(), "the generated call");
    }
    rust_client_against(&exe, |c| {
        let mut dynamic = iface.client();
        let mut local = Pfs::new();
        let mut rng = Rng(0x0dd_ba11_cafe_f00d);
        for k in 0..100 {
            let (client, fobj) = (rng.next() as i32, rng.next() as i32);
            let (flags, mode) = (rng.below(8) as i32 - 1, rng.below(512) as i32);
            let mut h_l = 0;
            let mut a = [
                Value::I32(client),
                Value::I32(fobj),
                Value::I32(flags),
                Value::I32(mode),
                Value::Void,
            ];
            let r = dynamic.call(c, open, &mut a).expect("pfs_open");
            let want = Pfs::open(client, fobj, flags, mode, &mut h_l);
            assert!(r == Value::I32(want) && a[4] == Value::I32(h_l), "call {k}");

            let n = if k % 5 == 4 {
                4096
            } else {
                rng.below(300) as usize
            };
            let words: Vec<i32> = (0..n).map(|_| rng.next() as i32).collect();
            let mut pos_l = rng.below(FILE_WORDS as u64) as i32;
            let len = n as i32 * 4;
            let mut a = [
                Value::I32(h_l),
                Value::I32(pos_l),
                Value::I32(len),
                Value::Seq(Seq::I32(words.clone())),
            ];
            let r = dynamic.call(c, write, &mut a).expect("pfs_write");
            let want = local.write(h_l, &mut pos_l, len, &words);
            assert!(
                r == Value::I32(want) && a[1] == Value::I32(pos_l),
                "call {k}"
            );

            let count = rng.below(2000) as i32;
            let mut pos_l = rng.below(FILE_WORDS as u64) as i32;
            let mut a = [
                Value::I32(h_l),
                Value::I32(pos_l),
                Value::I32(count),
                Value::Void,
            ];
            let r = dynamic.call(c, dir_op, &mut a).expect("pfs_get_direntries");
            let mut want = Vec::new();
            let r_l = local.read(h_l, &mut pos_l, count, usize::MAX, |w| want.push(w));
            assert!(
                r == Value::I32(r_l) && a[1] == Value::I32(pos_l),
                "call {k}"
            );
            assert!(a[3] == Value::Seq(Seq::I32(want)), "call {k}: the entries");
        }
    });
}

// ---- C client, dynamic server ----------------------------------------------

/// The dynamic server's handlers for pfs (docs/idl.md's conventions),
/// over the same model as the generated Rust server.
mod dyn_pfs {
    use super::Pfs;

    pub unsafe extern "C" fn open(
        _: *mut Pfs,
        client: i32,
        fobj: i32,
        flags: i32,
        mode: i32,
        handle: *mut i32,
    ) -> i32 {
        // SAFETY: a pointer into the received record.
        Pfs::open(client, fobj, flags, mode, unsafe { &mut *handle })
    }

    pub unsafe extern "C" fn write(
        ctx: *mut Pfs,
        handle: i32,
        pos: *mut i32,
        len: i32,
        data: *const i32,
        n: u64,
    ) -> i32 {
        // SAFETY: the registered model; a pointer into the record; `n`
        // checked elements in the area.
        unsafe {
            let data = if n == 0 {
                &[][..]
            } else {
                std::slice::from_raw_parts(data, n as usize)
            };
            (*ctx).write(handle, &mut *pos, len, data)
        }
    }

    pub unsafe extern "C" fn dir(
        ctx: *mut Pfs,
        handle: i32,
        pos: *mut i32,
        count: i32,
        data: *mut i32,
        n: *mut u32,
    ) -> i32 {
        // SAFETY: as above; `data` has room for `*n` elements.
        unsafe {
            let room = *n as usize;
            let mut k = 0usize;
            let r = (*ctx).read(handle, &mut *pos, count, room, |w| {
                *data.add(k) = w;
                k += 1;
            });
            *n = k as u32;
            r
        }
    }
}

#[test]
fn c_client_dynamic_server_pfs() {
    // The dynamic server (loaded from the IDL text at run time) serves the
    // C client in its generated dispatch-and-reply loop.
    if !have_gcc("c_client_dynamic_server_pfs") {
        return;
    }
    use idl::dynamic::{Handler, Interface};
    let dir = TempDir::new("pfs-c2d");
    let exe = build(&dir, "pfs", PFS_IDL, "pfs_test.c");
    let iface: &'static Interface = Box::leak(Box::new(
        Interface::load(PFS_IDL, "pfs").expect("the dynamic stubs load"),
    ));
    let model: *mut Pfs = Box::leak(Box::new(Pfs::new()));
    let h = |f: usize| {
        // SAFETY: each handler has its operation's C signature; the model
        // is leaked, so it outlives the server.
        unsafe { Handler::new(f, model.cast()) }
    };
    // SAFETY: as above.
    let server = unsafe {
        iface.server(&[
            ("pfs_open", h(dyn_pfs::open as *const () as usize)),
            ("pfs_write", h(dyn_pfs::write as *const () as usize)),
            ("pfs_get_direntries", h(dyn_pfs::dir as *const () as usize)),
        ])
    }
    .expect("the dynamic server");
    if cfg!(target_arch = "x86_64") {
        assert!(server.shm_listing().is_some(), "the generated loop");
    }
    let server: &'static idl::dynamic::DynServer<'static> = Box::leak(Box::new(server));
    let end = ServerEnd::create(&Config::default()).expect("create a channel");
    c_client_against(&exe, "200", end, move |mut s| {
        server.serve(&mut s).map_err(|e| match e {
            idl::dynamic::CallError::Transport(e) => e,
            e => CallError::Malformed(Box::leak(e.to_string().into_boxed_str())),
        })
    });
}

// ---- names the generated C must keep apart ---------------------------------

/// Compiles `src`'s generated C as the file `<stem>.idl` would be, with
/// `gcc -std=c11 -Wall -Wextra -Werror -c`.
fn gcc_compiles(dir: &Path, stem: &str, src: &str) {
    let model = idl::parse(src).unwrap_or_else(|e| panic!("{}", e.render(src)));
    let (h, c) = idl::gen_c::generate(&model, stem);
    std::fs::write(dir.join(format!("{stem}.h")), h).expect("write .h");
    std::fs::write(dir.join(format!("{stem}.c")), c).expect("write .c");
    let out = Command::new("gcc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-c", "-o"])
        .arg(dir.join(format!("{stem}.o")))
        .arg("-I")
        .arg(manifest().join("c"))
        .arg(dir.join(format!("{stem}.c")))
        .output()
        .expect("run gcc");
    check_output(&format!("gcc {stem}.c"), &out);
}

/// Files the front end accepts compile as C: operations named as the
/// generator's own functions (`serve`, `dispatch`, `a` beside `a_server`,
/// `f` beside `f_msg`), all-caps operations, a file name starting with a
/// digit, constants named as the generated code's locals (and as
/// parameters), typedef'd `[out]` arrays, a long flat constant chain,
/// interfaces whose Rust modules are keywords (`Fn`).
#[test]
fn accepted_names_compile_as_c() {
    if !have_gcc("accepted_names_compile_as_c") {
        return;
    }
    let dir = TempDir::new("names");
    for (stem, file) in [
        ("names", "tests/idl/names.idl"),
        ("clash", "tests/idl/clash.idl"),
        ("19d5", "tests/idl/clash.idl"),
        ("keywords", "tests/idl/keywords.idl"),
    ] {
        let src = std::fs::read_to_string(manifest().join(file)).expect("read idl");
        gcc_compiles(&dir.0, stem, &src);
    }
    let srcs = [
        "const long s = 3; const long len = 4; const long x = 5; const long m = 6;\n\
         interface I { long f([in] long x, [in] string y, [out] sequence<long> z); };",
        "typedef long LA[4]; typedef LA LB[2];\n\
         interface I { void b([out] LA la, [out] LB lb, [in] LA lc); };",
        "interface I { long a([in] long x); };\ninterface J { long I_a([in] long x); };",
    ];
    for (k, src) in srcs.iter().enumerate() {
        gcc_compiles(&dir.0, &format!("case{k}"), src);
    }
}

/// The header #defines its include guard (`<STEM>_IDL_H`) before anything
/// else, so a name of the file spelled like it would vanish from the
/// header: the guard yields instead (`_` appended until no field,
/// parameter, constant, ... takes it). tests/c/guard.idl names a field, a
/// parameter and a constant as the guards `guard.h` would have; its C
/// program names all three, compiles, and round-trips through the
/// generated client and server.
#[test]
fn the_include_guard_yields_to_the_files_names() {
    if !have_gcc("the_include_guard_yields_to_the_files_names") {
        return;
    }
    let dir = TempDir::new("guard");
    let src = std::fs::read_to_string(manifest().join("tests/c/guard.idl")).expect("read idl");
    let exe = build(&dir, "guard", &src, "guard_test.c");
    let h = std::fs::read_to_string(dir.0.join("guard.h")).expect("read guard.h");
    assert!(h.contains("#ifndef GUARD_IDL_H___\n"), "{h}");
    let out = Command::new(&exe).arg("c2c").output().expect("run");
    check_output("guard_test c2c", &out);
}
