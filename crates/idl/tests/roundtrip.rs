//! Round trips through the generated Rust stubs: the paper's pfs calls and
//! an interface with every parameter kind and direction
//! (tests/idl/every.idl), over the shared-memory channel with client and
//! server in two threads and in two processes, and over unet's loop
//! transport. Each result is checked against the same call made locally,
//! on a second server object that has seen the same calls.
//!
//! The generated code is checked in (tests/idl/*.rs) and
//! `generated_code_is_current` checks that it is what the generator makes
//! today; `IDL_BLESS=1 cargo test -p idl --test roundtrip` rewrites it.

use std::path::Path;
use std::time::Duration;

use idl::rt::shm::{self, ClientEnd, Config, ServerEnd};
use idl::rt::{CallError, ClientTransport, OutSeq, OutStr, Status};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[allow(dead_code)]
mod gen_pfs {
    include!("idl/pfs.rs");
}

#[allow(dead_code)]
mod gen_every {
    include!("idl/every.rs");
}

#[allow(dead_code)]
mod gen_names {
    include!("idl/names.rs");
}

#[allow(dead_code)]
mod gen_clash {
    include!("idl/clash.rs");
}

#[allow(dead_code)]
mod gen_keywords {
    include!("idl/keywords.rs");
}

use gen_every::{Pair, Point, every};
use gen_pfs::pfs;

const MANIFEST: &str = env!("CARGO_MANIFEST_DIR");

#[test]
fn generated_code_is_current() {
    let root = Path::new(MANIFEST);
    for (idl_file, rs) in [
        ("idl/pfs.idl", "tests/idl/pfs.rs"),
        ("tests/idl/every.idl", "tests/idl/every.rs"),
        ("tests/idl/names.idl", "tests/idl/names.rs"),
        ("tests/idl/clash.idl", "tests/idl/clash.rs"),
        ("tests/idl/keywords.idl", "tests/idl/keywords.rs"),
        ("tests/idl/counts.idl", "tests/idl/counts.rs"),
    ] {
        let src = std::fs::read_to_string(root.join(idl_file)).expect("read idl");
        let model = idl::parse(&src).unwrap_or_else(|e| panic!("{}", e.render(&src)));
        let now = idl::gen_rust::generate(&model);
        let path = root.join(rs);
        if std::env::var_os("IDL_BLESS").is_some() {
            std::fs::write(&path, &now).expect("write generated code");
            continue;
        }
        let old = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(old == now, "{rs} is stale: rerun with IDL_BLESS=1");
    }
}

/// The child process's side of `build_helper`: `idl::compile` as a build
/// script calls it, with `OUT_DIR` set by the parent.
#[test]
fn child_compile() {
    if std::env::var_os("IDL_TEST_COMPILE").is_none() {
        return;
    }
    let out = idl::compile(Path::new(MANIFEST).join("idl/pfs.idl")).expect("compile");
    println!("wrote {}", out.display());
}

#[test]
fn build_helper() {
    let dir = std::env::temp_dir().join(format!("idl-build-helper-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    // Errors name the file, and the line and column in it.
    let missing = dir.join("missing.idl");
    let e = idl::compile(&missing).expect_err("no such file");
    assert!(e.to_string().contains("missing.idl"), "{e}");
    let bad = dir.join("bad.idl");
    std::fs::write(&bad, "interface i {\n  union u;\n};\n").expect("write");
    let e = idl::compile(&bad).expect_err("unsupported construct");
    assert_eq!(
        e.to_string(),
        format!(
            "{}:2:3: `union` is not supported (unions are outside the IDL4 subset)",
            bad.display()
        )
    );
    // Outside a build script there is no OUT_DIR.
    if std::env::var_os("OUT_DIR").is_none() {
        let good = Path::new(MANIFEST).join("idl/pfs.idl");
        assert!(
            idl::compile(&good)
                .expect_err("no OUT_DIR")
                .to_string()
                .contains("OUT_DIR")
        );
    }
    // As a build script: $OUT_DIR/pfs.rs and the rerun line.
    let out = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "child_compile",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("IDL_TEST_COMPILE", "1")
        .env("OUT_DIR", &dir)
        .output()
        .expect("run the child");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let pfs_idl = Path::new(MANIFEST).join("idl/pfs.idl");
    assert!(
        stdout.contains(&format!("cargo:rerun-if-changed={}", pfs_idl.display())),
        "{stdout}"
    );
    let written = std::fs::read_to_string(dir.join("pfs.rs")).expect("pfs.rs written");
    let src = std::fs::read_to_string(&pfs_idl).expect("read");
    assert_eq!(
        written,
        idl::gen_rust::generate(&idl::parse(&src).expect("parse"))
    );
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------- pfs

/// A file server of the paper's pfs calls: files of `i32` words.
#[derive(Clone, Default)]
struct Pfs {
    files: Vec<Vec<i32>>,
}

impl pfs::Server for Pfs {
    fn pfs_open(&mut self, client: i32, fobj: i32, flags: i32, mode: i32, handle: &mut i32) -> i32 {
        self.files.push(vec![client, fobj, flags, mode]);
        *handle = self.files.len() as i32 - 1;
        0
    }

    fn pfs_write(&mut self, handle: i32, pos: &mut i32, len: i32, data: &[i32]) -> i32 {
        let Some(f) = self.files.get_mut(handle as usize) else {
            return -1;
        };
        let at = (*pos).max(0) as usize;
        let n = (len.max(0) as usize).min(data.len());
        if f.len() < at + n {
            f.resize(at + n, 0);
        }
        f[at..at + n].copy_from_slice(&data[..n]);
        *pos = (at + n) as i32;
        n as i32
    }

    fn pfs_get_direntries(
        &mut self,
        handle: i32,
        pos: &mut i32,
        count: i32,
        data: &mut OutSeq<'_, i32>,
    ) -> i32 {
        let Some(f) = self.files.get(handle as usize) else {
            return -1;
        };
        let at = ((*pos).max(0) as usize).min(f.len());
        let n = (count.max(0) as usize).min(f.len() - at);
        if data.extend_from_slice(&f[at..at + n]).is_err() {
            return -2;
        }
        *pos = (at + n) as i32;
        n as i32
    }
}

/// Random pfs calls through `t`, each checked against `local`.
fn pfs_calls(t: &mut impl ClientTransport, local: &mut Pfs, rng: &mut StdRng, rounds: usize) {
    use pfs::Server as _;
    for _ in 0..rounds {
        match rng.random_range(0..3) {
            0 => {
                let a: [i32; 4] = rng.random();
                let mut h = 0;
                let r = pfs::pfs_open(t, a[0], a[1], a[2], a[3], &mut h).expect("pfs_open");
                let mut hl = 0;
                assert_eq!(
                    (r, h),
                    (local.pfs_open(a[0], a[1], a[2], a[3], &mut hl), hl)
                );
            }
            1 => {
                let handle = rng.random_range(-1..local.files.len() as i32 + 1);
                let data: Vec<i32> = (0..rng.random_range(0..2000))
                    .map(|_| rng.random())
                    .collect();
                let len = rng.random_range(0..data.len() as i32 + 2);
                let mut pos = rng.random_range(0..100);
                let mut pos_l = pos;
                let r = pfs::pfs_write(t, handle, &mut pos, len, &data).expect("pfs_write");
                assert_eq!(
                    (r, pos),
                    (local.pfs_write(handle, &mut pos_l, len, &data), pos_l)
                );
            }
            _ => {
                let handle = rng.random_range(-1..local.files.len() as i32 + 1);
                let mut pos = rng.random_range(0..100);
                let count = rng.random_range(0..3000);
                let mut data = vec![7; 3];
                let mut pos_l = pos;
                let r = pfs::pfs_get_direntries(t, handle, &mut pos, count, &mut data)
                    .expect("pfs_get_direntries");
                let mut buf = vec![0; 1 << 16];
                let mut w = OutSeq::new(&mut buf);
                let rl = local.pfs_get_direntries(handle, &mut pos_l, count, &mut w);
                assert_eq!((r, pos, &data[..]), (rl, pos_l, w.as_mut_slice() as &[i32]));
            }
        }
    }
}

// ---------------------------------------------------------------- every

/// A server of every kind of parameter: each result a function of the
/// arguments and of the number of calls so far.
#[derive(Clone, Default)]
struct Every {
    calls: u64,
}

impl every::Server for Every {
    fn null(&mut self) {
        self.calls += 1;
    }

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
        self.calls += 1;
        *ia = ia.wrapping_add(a);
        *id = id.wrapping_mul(3) ^ d;
        *ig = ig.wrapping_sub(g).wrapping_add(self.calls as i64);
        *ob = b ^ 0x5a;
        *of = f.rotate_left(3) ^ e as u32;
        *oh = h.wrapping_add(c as u64);
        (a as i64)
            .wrapping_add(b as i64)
            .wrapping_add(c as i64)
            .wrapping_add(d as i64)
            .wrapping_add(e as i64)
            .wrapping_add(f as i64)
            .wrapping_add(g)
            .wrapping_add(h as i64)
    }

    fn flags(&mut self, a: bool, b: &mut bool, c: &mut bool) -> bool {
        self.calls += 1;
        *c = a ^ *b;
        *b = !*b;
        a && *c
    }

    fn structs(&mut self, p: Point, q: &mut Pair, r: &mut Point) -> Point {
        self.calls += 1;
        *r = Point {
            x: p.y as i16,
            y: p.x as i32,
            tag: q.b,
            ..p
        };
        q.a = q.a.wrapping_mul(p.y as i64);
        q.p.tag = p.tag;
        Point {
            x: p.x.wrapping_neg(),
            ..q.p
        }
    }

    fn arrays(&mut self, a: [i32; 4], b: &mut [i16; 3], c: &mut [u8; 5], ps: [Point; 2]) {
        self.calls += 1;
        for (i, x) in b.iter_mut().enumerate() {
            *x = x.wrapping_add(a[i] as i16);
        }
        *c = [
            a[3] as u8,
            ps[0].tag,
            ps[1].tag,
            b[0] as u8,
            self.calls as u8,
        ];
    }

    fn chars(&mut self, c: u8, d: &mut u8) -> u8 {
        self.calls += 1;
        *d = d.wrapping_add(c);
        c.to_ascii_uppercase()
    }

    fn strings(&mut self, s: &str, io: &mut OutStr<'_>, o: &mut OutStr<'_>) -> i32 {
        self.calls += 1;
        let _ = io.push_str("+");
        let _ = io.push_str(s);
        let _ = o.push_str(&s.to_uppercase());
        s.chars().count() as i32
    }

    fn seqs(
        &mut self,
        a: &[i32],
        b: &mut [i16],
        c: &mut OutSeq<'_, u64>,
        ps: &[Point],
        bytes: &mut OutSeq<'_, u8>,
    ) {
        self.calls += 1;
        for x in b.iter_mut() {
            *x = x.wrapping_mul(2);
        }
        for &x in a {
            let _ = c.push(x as u64 ^ self.calls);
        }
        for p in ps {
            let _ = bytes.push(p.tag);
        }
    }

    fn sized(&mut self, in_data: &[i16], buf: &mut [u8], out_data: &mut OutSeq<'_, i64>) -> u32 {
        self.calls += 1;
        buf.reverse();
        let n = out_data.spare().len().min(in_data.len());
        for (o, &x) in out_data.spare().iter_mut().zip(in_data) {
            *o = x as i64 * 1000;
        }
        let _ = out_data.advance(n);
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
        self.calls += 1;
        let _ = std::fmt::Write::write_fmt(name, format_args!("#{x}/{}", blob.len()));
        for (i, &b) in blob.iter().enumerate().take(10) {
            let _ = pts.push(Point {
                x: i as i16,
                y: x,
                tag: b,
                ..Default::default()
            });
        }
        *ok = x % 2 == 0;
    }

    fn fail(&mut self, x: i32) -> i32 {
        assert!(x >= 0, "fail({x}): negative");
        x.wrapping_mul(2)
    }
}

fn point(rng: &mut StdRng) -> Point {
    Point {
        x: rng.random(),
        y: rng.random(),
        tag: rng.random(),
        ..Default::default()
    }
}

fn text(rng: &mut StdRng, max: usize) -> String {
    const ALPHABET: &[char] = &['a', 'b', 'Z', ' ', 'é', 'ß', '字', '🦀', '\0', '\n'];
    (0..rng.random_range(0..=max))
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())])
        .collect()
}

/// Local writers for an out string or sequence: a buffer as large as the
/// channel's part would be (the results only differ on overflow, which
/// these calls stay clear of).
struct Buf<T>(Vec<T>);

impl<T: idl::rt::Plain + Default> Buf<T> {
    fn new() -> Self {
        Buf(vec![T::default(); 1 << 16])
    }
}

/// Random calls of every operation through `t`, each checked against `local`.
fn every_calls(t: &mut impl ClientTransport, local: &mut Every, rng: &mut StdRng, rounds: usize) {
    use every::Server as _;
    for _ in 0..rounds {
        match rng.random_range(0..11) {
            0 => {
                every::null(t).expect("null");
                local.null();
            }
            1 => {
                let (a, b, c, d, e, f, g, h): (i8, u8, i16, u16, i32, u32, i64, u64) = (
                    rng.random(),
                    rng.random(),
                    rng.random(),
                    rng.random(),
                    rng.random(),
                    rng.random(),
                    rng.random(),
                    rng.random(),
                );
                let (mut ia, mut id, mut ig): (i8, u16, i64) =
                    (rng.random(), rng.random(), rng.random());
                let (mut ob, mut of, mut oh) = (1, 2, 3);
                let (mut ia_l, mut id_l, mut ig_l) = (ia, id, ig);
                let (mut ob_l, mut of_l, mut oh_l) = (0, 0, 0);
                let r = every::ints(
                    t, a, b, c, d, e, f, g, h, &mut ia, &mut id, &mut ig, &mut ob, &mut of, &mut oh,
                )
                .expect("ints");
                let rl = local.ints(
                    a, b, c, d, e, f, g, h, &mut ia_l, &mut id_l, &mut ig_l, &mut ob_l, &mut of_l,
                    &mut oh_l,
                );
                assert_eq!(
                    (r, ia, id, ig, ob, of, oh),
                    (rl, ia_l, id_l, ig_l, ob_l, of_l, oh_l)
                );
            }
            2 => {
                let a: bool = rng.random();
                let mut b: bool = rng.random();
                let mut c = rng.random();
                let (mut b_l, mut c_l) = (b, false);
                let r = every::flags(t, a, &mut b, &mut c).expect("flags");
                assert_eq!((r, b, c), (local.flags(a, &mut b_l, &mut c_l), b_l, c_l));
            }
            3 => {
                let p = point(rng);
                let mut q = Pair {
                    a: rng.random(),
                    b: rng.random(),
                    p: point(rng),
                    ..Default::default()
                };
                let mut r = point(rng);
                let (mut q_l, mut r_l) = (q, Point::default());
                let ret = every::structs(t, p, &mut q, &mut r).expect("structs");
                assert_eq!(
                    (ret, q, r),
                    (local.structs(p, &mut q_l, &mut r_l), q_l, r_l)
                );
            }
            4 => {
                let a: [i32; 4] = rng.random();
                let mut b: [i16; 3] = rng.random();
                let mut c = [9u8; 5];
                let ps = [point(rng), point(rng)];
                let (mut b_l, mut c_l) = (b, [0; 5]);
                every::arrays(t, a, &mut b, &mut c, ps).expect("arrays");
                local.arrays(a, &mut b_l, &mut c_l, ps);
                assert_eq!((b, c), (b_l, c_l));
            }
            5 => {
                let c: u8 = rng.random();
                let mut d: u8 = rng.random();
                let mut d_l = d;
                let r = every::chars(t, c, &mut d).expect("chars");
                assert_eq!((r, d), (local.chars(c, &mut d_l), d_l));
            }
            6 => {
                let s = text(rng, 300);
                let mut io = text(rng, 300);
                let mut o = text(rng, 5);
                let (mut io_b, mut o_b) = (Buf::<u8>::new(), Buf::<u8>::new());
                let (mut io_w, mut o_w) = (OutStr::new(&mut io_b.0), OutStr::new(&mut o_b.0));
                io_w.push_str(&io).expect("fits");
                let rl = local.strings(&s, &mut io_w, &mut o_w);
                let r = every::strings(t, &s, &mut io, &mut o).expect("strings");
                assert_eq!(
                    (r, io.as_bytes(), o.as_bytes()),
                    (rl, io_w.as_bytes(), o_w.as_bytes())
                );
            }
            7 => {
                let a: Vec<i32> = (0..rng.random_range(0..300))
                    .map(|_| rng.random())
                    .collect();
                let mut b: Vec<i16> = (0..rng.random_range(0..300))
                    .map(|_| rng.random())
                    .collect();
                let ps: Vec<Point> = (0..rng.random_range(0..50)).map(|_| point(rng)).collect();
                let (mut c, mut bytes) = (vec![1u64; 4], vec![2u8; 9]);
                let mut b_l = b.clone();
                let (mut c_b, mut bytes_b) = (Buf::<u64>::new(), Buf::<u8>::new());
                let (mut c_w, mut bytes_w) = (OutSeq::new(&mut c_b.0), OutSeq::new(&mut bytes_b.0));
                every::seqs(t, &a, &mut b, &mut c, &ps, &mut bytes).expect("seqs");
                local.seqs(&a, &mut b_l, &mut c_w, &ps, &mut bytes_w);
                assert_eq!(
                    (&b, &c[..], &bytes[..]),
                    (
                        &b_l,
                        c_w.as_mut_slice() as &[u64],
                        bytes_w.as_mut_slice() as &[u8]
                    )
                );
            }
            8 => {
                let in_data: Vec<i16> = (0..rng.random_range(0..500))
                    .map(|_| rng.random())
                    .collect();
                let mut buf: Vec<u8> = (0..rng.random_range(0..500))
                    .map(|_| rng.random())
                    .collect();
                let mut out = Vec::new();
                let mut buf_l = buf.clone();
                let mut out_b = Buf::<i64>::new();
                let mut out_w = OutSeq::new(&mut out_b.0);
                let r = every::sized(t, &in_data, &mut buf, &mut out).expect("sized");
                let rl = local.sized(&in_data, &mut buf_l, &mut out_w);
                assert_eq!(
                    (r, &buf, &out[..]),
                    (rl, &buf_l, out_w.as_mut_slice() as &[i64])
                );
            }
            9 => {
                let x: i32 = rng.random();
                let mut name = text(rng, 40);
                let blob: Vec<u8> = (0..rng.random_range(0..40)).map(|_| rng.random()).collect();
                let (mut pts, mut ok) = (vec![point(rng)], true);
                let (mut name_b, mut pts_b) =
                    (Buf::<u8>::new(), Buf::<Point>(vec![Point::default(); 100]));
                let (mut name_w, mut pts_w) =
                    (OutStr::new(&mut name_b.0), OutSeq::new(&mut pts_b.0));
                name_w.push_str(&name).expect("fits");
                let mut ok_l = false;
                local.corba(x, &mut name_w, &mut pts_w, &mut ok_l, &blob);
                every::corba(t, x, &mut name, &mut pts, &mut ok, &blob).expect("corba");
                assert_eq!(
                    (name.as_bytes(), &pts[..], ok),
                    (name_w.as_bytes(), pts_w.as_mut_slice() as &[Point], ok_l)
                );
            }
            _ => {
                let x = rng.random_range(-3..100);
                let r = every::fail(t, x);
                if x < 0 {
                    assert_eq!(
                        r.map_err(|e| e.status())
                            .expect_err("a panic fails the call"),
                        Some(Status::ServerFailed)
                    );
                } else {
                    assert_eq!(r.expect("fail"), local.fail(x));
                }
            }
        }
    }
}

/// Quiets the panic message of `fail`'s deliberate panics (once per test binary).
fn quiet_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let old = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info.to_string().contains("negative") {
                old(info);
            }
        }));
    });
}

fn config() -> Config {
    Config {
        area: 1 << 20,
        ..Config::default()
    }
}

#[test]
fn pfs_over_shm_threads() {
    let (mut c, mut s) = shm::pair(&config()).expect("channel");
    c.set_timeout(Some(Duration::from_secs(60)));
    let server = std::thread::spawn(move || pfs::serve(&mut Pfs::default(), &mut s));
    let mut rng = StdRng::seed_from_u64(1);
    pfs_calls(&mut c, &mut Pfs::default(), &mut rng, 500);
    drop(c);
    server
        .join()
        .expect("server thread")
        .expect("server loop ends cleanly");
}

#[test]
fn every_kind_over_shm_threads() {
    quiet_panics();
    let (mut c, mut s) = shm::pair(&config()).expect("channel");
    c.set_timeout(Some(Duration::from_secs(60)));
    let server = std::thread::spawn(move || every::serve(&mut Every::default(), &mut s));
    let mut rng = StdRng::seed_from_u64(2);
    every_calls(&mut c, &mut Every::default(), &mut rng, 2000);
    drop(c);
    server
        .join()
        .expect("server thread")
        .expect("server loop ends cleanly");
}

#[test]
fn every_kind_sleeping_not_spinning() {
    // No spinning: every wait goes through the futex and its waiter bit.
    quiet_panics();
    let (mut c, mut s) = shm::pair(&Config {
        spin: 0,
        ..config()
    })
    .expect("channel");
    c.set_timeout(Some(Duration::from_secs(60)));
    let server = std::thread::spawn(move || every::serve(&mut Every::default(), &mut s));
    let mut rng = StdRng::seed_from_u64(3);
    every_calls(&mut c, &mut Every::default(), &mut rng, 300);
    drop(c);
    server
        .join()
        .expect("server thread")
        .expect("server loop ends cleanly");
}

/// The child process's side of `two_processes`: a server on the channel
/// whose descriptor the parent passed; nothing when run as a plain test.
#[test]
fn child_server() {
    if std::env::var_os("IDL_TEST_CHANNEL").is_none() {
        return;
    }
    quiet_panics();
    // SAFETY: the parent passed this descriptor for this purpose; nothing
    // else in this process owns it, and this runs once.
    let fd = unsafe { shm::fd_from_env("IDL_TEST_CHANNEL") }.expect("inherited channel");
    let mut s = ServerEnd::from_fd(fd).expect("map channel");
    match std::env::var("IDL_TEST_IFACE").as_deref() {
        Ok("pfs") => pfs::serve(&mut Pfs::default(), &mut s).expect("serve pfs"),
        _ => every::serve(&mut Every::default(), &mut s).expect("serve every"),
    }
}

fn spawn_server(iface: &str) -> (ClientEnd, std::process::Child) {
    let fd = shm::create(&config()).expect("channel");
    let pass = shm::inheritable(&fd).expect("inheritable");
    let child = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args(["child_server", "--exact", "--nocapture", "--test-threads=1"])
        .env(
            "IDL_TEST_CHANNEL",
            std::os::fd::AsRawFd::as_raw_fd(&pass).to_string(),
        )
        .env("IDL_TEST_IFACE", iface)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("spawn the server process");
    drop(pass);
    let mut c = ClientEnd::from_fd(fd).expect("map channel");
    c.set_timeout(Some(Duration::from_secs(60)));
    (c, child)
}

#[test]
fn two_processes() {
    let (mut c, mut child) = spawn_server("every");
    let mut rng = StdRng::seed_from_u64(4);
    every_calls(&mut c, &mut Every::default(), &mut rng, 1000);
    drop(c);
    assert!(
        child.wait().expect("wait for the server").success(),
        "the server process failed"
    );

    let (mut c, mut child) = spawn_server("pfs");
    let mut rng = StdRng::seed_from_u64(5);
    pfs_calls(&mut c, &mut Pfs::default(), &mut rng, 300);
    drop(c);
    assert!(
        child.wait().expect("wait for the server").success(),
        "the server process failed"
    );
}

#[test]
fn limits_are_typed_errors() {
    let limits = idl::Limits {
        max_strings: 31,
        max_string_bytes: 3000,
        max_record: 4096,
    };
    let (mut c, mut s) = shm::pair(&Config {
        area: 4096,
        limits,
        ..config()
    })
    .expect("channel");
    c.set_timeout(Some(Duration::from_secs(60)));
    let server = std::thread::spawn(move || every::serve(&mut Every::default(), &mut s));
    // A string over the per-string limit: refused before sending.
    let big = "x".repeat(3001);
    let (mut io, mut o) = (String::new(), String::new());
    let e = every::strings(&mut c, &big, &mut io, &mut o).expect_err("too long");
    assert!(
        matches!(
            e,
            CallError::StringTooLong {
                len: 3001,
                max: 3000
            }
        ),
        "{e}"
    );
    // In strings that fill the area: refused before sending.
    let mut b = vec![0i16; 500];
    let (a, ps) = ([0; 750], [Point::default(); 85]);
    let e = every::seqs(&mut c, &a, &mut b, &mut Vec::new(), &ps, &mut Vec::new())
        .expect_err("area full");
    assert!(matches!(e, CallError::AreaFull { .. }), "{e}");
    // Out strings that do not fit the rest of the area: the server's Overflow.
    let s = "y".repeat(1000);
    let mut io = "z".repeat(1000);
    let e = every::strings(&mut c, &s, &mut io, &mut o).expect_err("overflow");
    assert_eq!(e.status(), Some(Status::Overflow));
    // The channel still works.
    let (mut io, mut o) = ("a".to_string(), String::new());
    assert_eq!(
        every::strings(&mut c, "b", &mut io, &mut o).expect("small strings"),
        1
    );
    assert_eq!((io.as_str(), o.as_str()), ("a+b", "B"));
    drop(c);
    server
        .join()
        .expect("server thread")
        .expect("server loop ends cleanly");
}

#[test]
fn every_kind_over_unet_loop() {
    quiet_panics();
    let (mut c, mut s) =
        idl::rt::unet::loop_pair(&idl::rt::unet::Config::default()).expect("unet channel");
    c.set_timeout(Some(Duration::from_secs(60)));
    let server = std::thread::spawn(move || every::serve(&mut Every::default(), &mut s));
    let mut rng = StdRng::seed_from_u64(6);
    every_calls(&mut c, &mut Every::default(), &mut rng, 500);
    c.close();
    server
        .join()
        .expect("server thread")
        .expect("server loop ends cleanly");
}

#[test]
fn pfs_over_unet_loop() {
    let (mut c, mut s) =
        idl::rt::unet::loop_pair(&idl::rt::unet::Config::default()).expect("unet channel");
    c.set_timeout(Some(Duration::from_secs(60)));
    let server = std::thread::spawn(move || pfs::serve(&mut Pfs::default(), &mut s));
    let mut rng = StdRng::seed_from_u64(7);
    pfs_calls(&mut c, &mut Pfs::default(), &mut rng, 300);
    c.close();
    server
        .join()
        .expect("server thread")
        .expect("server loop ends cleanly");
}

/// A server of tests/idl/names.idl, whose names collide with the generated
/// code's own.
struct Names;

impl gen_names::mixed_case::Server for Names {
    #[allow(non_snake_case)]
    fn ReadFile(&mut self, Handle: i32, m: &mut i32, t: gen_names::T, s: &mut i32) -> i32 {
        *m = Handle + t.v;
        *s += 1;
        7
    }

    fn serve(&mut self, st: i32, req: i32, ret: &str, key: &mut OutSeq<'_, i32>) {
        let _ = key.extend_from_slice(&[st, req, ret.len() as i32]);
    }

    fn dispatch(&mut self, dispatch_stub: i32, m_desc: &mut OutStr<'_>) {
        let _ = std::fmt::Write::write_fmt(m_desc, format_args!("{dispatch_stub}"));
    }

    #[allow(non_snake_case)]
    fn t(&mut self, m_desc: bool, S: &mut gen_names::Server) -> bool {
        S.b = 9;
        S.Wide = -2;
        !m_desc
    }
}

#[test]
fn colliding_names() {
    use gen_names::mixed_case as mc;
    let (mut c, mut s) = shm::pair(&config()).expect("channel");
    let server = std::thread::spawn(move || mc::serve_(&mut Names, &mut s));
    let (mut m, mut st) = (0, 1);
    assert_eq!(
        mc::ReadFile(&mut c, 5, &mut m, gen_names::T { v: 3 }, &mut st).expect("ReadFile"),
        7
    );
    assert_eq!((m, st), (8, 2));
    let mut key = Vec::new();
    mc::serve(&mut c, 1, 2, "abc", &mut key).expect("serve");
    assert_eq!(key, [1, 2, 3]);
    let mut text = String::new();
    mc::dispatch(&mut c, 42, &mut text).expect("dispatch");
    assert_eq!(text, "42");
    let mut big = gen_names::Server::default();
    assert!(mc::t(&mut c, false, &mut big).expect("t"));
    assert_eq!((big.b, big.Wide), (9, -2));
    drop(c);
    server
        .join()
        .expect("server thread")
        .expect("server loop ends cleanly");
}

/// Servers of tests/idl/keywords.idl, whose interfaces' modules are Rust
/// keywords (`r#fn`, `r#mod`, `r#gen`, `r#try`).
struct Keywords;

impl gen_keywords::r#fn::Server for Keywords {
    fn call(&mut self, x: i32, i: gen_keywords::Impl) -> i32 {
        x * 10 + i.Type
    }
}

impl gen_keywords::r#mod::Server for Keywords {
    fn set(&mut self, v: &mut i32) {
        *v += 1;
    }
}

impl gen_keywords::r#gen::Server for Keywords {
    #[allow(non_snake_case)]
    fn Async(&mut self, s: &str) -> bool {
        s == "await"
    }
}

impl gen_keywords::r#try::Server for Keywords {
    fn again(&mut self, v: &mut OutSeq<'_, i32>) {
        let _ = v.extend_from_slice(&[1, 2, 3]);
    }
}

/// Runs `call` against `serve` over a fresh channel, the server in a
/// thread, and checks that the server's loop ends cleanly.
fn over_shm(serve: fn(&mut ServerEnd) -> Result<(), CallError>, call: impl FnOnce(&mut ClientEnd)) {
    let (mut c, mut s) = shm::pair(&config()).expect("channel");
    let server = std::thread::spawn(move || serve(&mut s));
    call(&mut c);
    drop(c);
    server
        .join()
        .expect("server thread")
        .expect("server loop ends cleanly");
}

#[test]
fn interfaces_named_as_rust_keywords() {
    use gen_keywords::{r#fn, r#gen, r#mod, r#try};
    over_shm(
        |s| r#fn::serve(&mut Keywords, s),
        |c| {
            let i = gen_keywords::Impl { Type: 4 };
            assert_eq!(r#fn::call(c, 3, i).expect("call"), 34);
        },
    );
    over_shm(
        |s| r#mod::serve(&mut Keywords, s),
        |c| {
            let mut v = 41;
            r#mod::set(c, &mut v).expect("set");
            assert_eq!(v, 42);
        },
    );
    over_shm(
        |s| r#gen::serve(&mut Keywords, s),
        |c| {
            assert!(r#gen::Async(c, "await").expect("Async"));
            assert!(!r#gen::Async(c, "yield").expect("Async"));
        },
    );
    over_shm(
        |s| r#try::serve(&mut Keywords, s),
        |c| {
            let mut v = Vec::new();
            r#try::again(c, &mut v).expect("again");
            assert_eq!(v, [1, 2, 3]);
        },
    );
}
