//! C interop: the C stubs of `idl::gen_c`, compiled with gcc at test time,
//! against each other and against the Rust run time (docs/idl.md,
//! "Generated C").
//!
//! - C to C: `tests/c/{pfs,kinds}_test.c` fork a server and call it, each
//!   call checked against the same call made locally;
//! - a hostile Rust client (raw requests through `idl::rt::shm`) against
//!   a C server: every request gets a status or a correct reply, the server
//!   never crashes (under valgrind when it is installed) and serves a good
//!   call afterwards.
//!
//! Without gcc the tests print why and pass, unless `IDL_REQUIRE_GCC=1`.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

use idl::model::{Op, Slot};
use idl::rt::shm::{self, ClientEnd, Config};
use idl::rt::{CallError, ClientTransport, Status};

const PFS_IDL: &str = include_str!("../idl/pfs.idl");
const KINDS_IDL: &str = include_str!("c/kinds.idl");

fn manifest() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Whether gcc runs; without it a test returns early, or fails if
/// `IDL_REQUIRE_GCC=1`.
fn have_gcc(test: &str) -> bool {
    let ok = Command::new("gcc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        if std::env::var("IDL_REQUIRE_GCC").is_ok_and(|v| v == "1") {
            panic!("{test}: gcc is not installed and IDL_REQUIRE_GCC=1");
        }
        eprintln!("{test}: skipped: gcc is not installed");
    }
    ok
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
/// the run time and `tests/c/<main>` into an executable, with the warnings
/// of the brief (-Wall -Wextra -Werror).
fn build(dir: &TempDir, stem: &str, idl_src: &str, main: &str) -> PathBuf {
    let idl = idl::parse(idl_src).unwrap_or_else(|e| panic!("{stem}.idl: {e}"));
    let (h, c) = idl::gen_c::generate(&idl, stem);
    std::fs::write(dir.0.join(format!("{stem}.h")), h).expect("write the header");
    std::fs::write(dir.0.join(format!("{stem}.c")), c).expect("write the source");
    let exe = dir.0.join(main.trim_end_matches(".c"));
    let rt = manifest().join("c");
    let out = Command::new("gcc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", "-g", "-I"])
        .arg(&rt)
        .arg("-I")
        .arg(&dir.0)
        .arg(manifest().join("tests/c").join(main))
        .arg(dir.0.join(format!("{stem}.c")))
        .arg(rt.join("idl_rt.c"))
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("run gcc");
    assert!(
        out.status.success(),
        "gcc failed on {main} with {stem}.c:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
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

// ---- C to C ---------------------------------------------------------------

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
    let child = spawn(exe, "server", &fd, &[], have_valgrind());
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
