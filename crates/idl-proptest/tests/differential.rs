//! The three servers of one interface refuse the same requests with the
//! same status: the generated Rust server (the build's harness), the
//! dynamic server (`idl::dynamic`, loaded from the same IDL text at run
//! time) and the generated C server (`idl::gen_c`, compiled with gcc).
//!
//! For each random interface of the build, the same requests go to all
//! three, each over its own shared-memory channel. The requests are drawn
//! from the operation's plan ([`idl::model::plan`]): every in and inout
//! value is valid most of the time, and now and then hostile where the
//! wire allows it: a `boolean` byte other than 0 or 1, a string that is
//! not UTF-8, a descriptor outside the string area, a sequence of one more
//! element than its `size_is` length's type counts. The first failing
//! check names the status, so the three must answer the same status for
//! every request. A request that passes every check reaches the
//! implementation, which differs on purpose (the Rust harness answers
//! random values, the dynamic handler does nothing, the C server has no
//! implementation and answers `ServerFailed`): those answers count as
//! "passed" and are compared as such; the values themselves are compared
//! by `random_interfaces` (Rust) and `idl`'s `c_interop` tests (C).
//!
//! Environment: `IDL_PROPTEST_RUN_SEED` (the requests),
//! `IDL_DIFF_REQUESTS` (per interface, 150 by default), `IDL_PROPTEST_ONLY`
//! (one interface by name). Without gcc the C server is left out, unless
//! `IDL_REQUIRE_GCC=1`.

use idl::model::plan::{OpPlan, Repr, plan};
use idl::rt::shm::{self, ClientEnd, ServerEnd};
use idl::rt::{CallError, ClientTransport, Status};
use idl_proptest::{CASES, Case, Rng, channel_config};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

const DEFAULT_RUN_SEED: u64 = 0xd1ff_5eed;
const DEFAULT_REQUESTS: usize = 150;

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    let v = v.trim().replace('_', "");
    let n = match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => v.parse(),
    };
    Some(n.unwrap_or_else(|e| panic!("{name}={v} is not a number: {e}")))
}

/// What a server answered, with the answers of a request that reached the
/// implementation folded into one.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// The request passed every check.
    Passed,
    /// A check refused it with this status.
    Refused(Status),
}

impl std::fmt::Display for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Answer::Passed => f.write_str("passed the checks"),
            Answer::Refused(s) => write!(f, "refused: {s}"),
        }
    }
}

fn answer(r: Result<&[u8], CallError>) -> Answer {
    match r {
        Ok(_)
        | Err(CallError::Status(Status::ServerFailed))
        | Err(CallError::Status(Status::Overflow)) => Answer::Passed,
        Err(CallError::Status(s)) => Answer::Refused(s),
        Err(e) => panic!("not a status: {e}"),
    }
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

/// Sends `r` on `c`: the area parts, the descriptors, the call.
fn send(c: &mut ClientEnd, r: &Request) -> Answer {
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
    answer(c.call_raw(r.key, &rec))
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

/// Compiles `case`'s C server (no implementation: every operation that
/// passes the checks answers `ServerFailed`) into `dir`.
fn c_server(dir: &Path, case: &Case, text: &str) -> PathBuf {
    let idl = idl::parse(text).expect("a random IDL the build compiled");
    let (h, c) = idl::gen_c::generate(&idl, case.name);
    let serve = h
        .find("_serve(idl_server *s, const ")
        .expect("the header declares a serve function");
    let start = h[..serve].rfind(' ').map_or(0, |i| i + 1);
    let iface = &h[start..serve];
    let main = format!(
        "#include <stdlib.h>\n#include \"{name}.h\"\n\
         int main(int argc, char **argv)\n{{\n\
         \x20   static const {iface}_impl impl;\n\
         \x20   idl_channel ch;\n\
         \x20   if (argc < 2 || idl_channel_map(&ch, atoi(argv[1])) != IDL_OK)\n\
         \x20       return 2;\n\
         \x20   int st = {iface}_serve(&ch, &impl, NULL);\n\
         \x20   idl_channel_unmap(&ch);\n\
         \x20   return st == IDL_OK ? 0 : 1;\n}}\n",
        name = case.name
    );
    std::fs::write(dir.join(format!("{}.h", case.name)), h).expect("write");
    std::fs::write(dir.join(format!("{}.c", case.name)), c).expect("write");
    let main_c = dir.join(format!("{}_main.c", case.name));
    std::fs::write(&main_c, main).expect("write");
    let rt = Path::new(env!("CARGO_MANIFEST_DIR")).join("../idl/c");
    let exe = dir.join(case.name);
    let out = Command::new("gcc")
        .args(["-std=c11", "-Wall", "-Werror", "-O1", "-I"])
        .arg(&rt)
        .arg("-I")
        .arg(dir)
        .arg(&main_c)
        .arg(dir.join(format!("{}.c", case.name)))
        .arg(rt.join("idl_rt.c"))
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("run gcc");
    assert!(
        out.status.success(),
        "gcc failed on {}:\n{}",
        case.idl_path,
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

fn spawn_c(exe: &Path, fd: &std::os::fd::OwnedFd) -> Child {
    let inherited = shm::inheritable(fd).expect("an inheritable memfd");
    let child = Command::new(exe)
        .arg(inherited.as_raw_fd().to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the C server");
    drop(inherited);
    child
}

extern "C" fn nothing() {}

/// Runs `requests` requests of `case` against the three servers; the
/// disagreements, one line each.
fn differ(
    case: &Case,
    seed: u64,
    requests: usize,
    c_exe: Option<&Path>,
    tally: &mut std::collections::BTreeMap<String, usize>,
) -> (Vec<String>, bool) {
    let text = std::fs::read_to_string(case.idl_path).expect("the build's IDL file");
    let idl = idl::parse(&text).expect("a random IDL the build compiled");
    let iface = &idl.interfaces[0];
    let plans: Vec<OpPlan> = iface
        .ops
        .iter()
        .map(|op| plan(&idl.structs, op).expect("a checked operation plans"))
        .collect();
    let dynamic =
        idl::dynamic::Interface::load(&text, &iface.name).expect("the dynamic stubs load");
    let handlers: Vec<(&str, idl::dynamic::Handler)> = iface
        .ops
        .iter()
        .map(|op| {
            // SAFETY: `nothing` takes no arguments and returns nothing:
            // under the C calling convention a caller's extra arguments
            // are ignored, and the stubs read a value return's register
            // as some bits of its type, any of which is valid.
            let h = unsafe {
                idl::dynamic::Handler::new(nothing as *const () as usize, std::ptr::null_mut())
            };
            (op.name.as_str(), h)
        })
        .collect();
    // SAFETY: see the handlers above; they have no context. An operation
    // with more arguments than the dynamic stubs pass in registers has no
    // dynamic server (a typed error): its interface runs without one.
    let dyn_server = unsafe { dynamic.server(&handlers) }.ok();

    let (mut rust_c, mut rust_s) = shm::pair(&channel_config()).expect("a channel");
    let (mut dyn_c, mut dyn_s) = shm::pair(&channel_config()).expect("a channel");
    let mut c_side = c_exe.map(|exe| {
        let fd = shm::create(&channel_config()).expect("a channel");
        let client = ClientEnd::from_fd(fd.try_clone().expect("dup")).expect("a client end");
        (client, spawn_c(exe, &fd))
    });
    let area = rust_c.area_len() as u32;
    let mut out = Vec::new();
    std::thread::scope(|sc| {
        let (tx, rx) = std::sync::mpsc::channel();
        let rust = sc.spawn(move || (case.serve)(&mut rust_s as &mut ServerEnd, 1, tx));
        let drain = sc.spawn(move || rx.iter().count());
        let dynt = dyn_server
            .as_ref()
            .map(|d| sc.spawn(|| d.serve(&mut dyn_s)));
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
            let a = send(&mut rust_c, &r);
            let d = dynt.is_some().then(|| send(&mut dyn_c, &r));
            let c = c_side.as_mut().map(|(c, _)| send(c, &r));
            *tally.entry(a.to_string()).or_default() += 1;
            if d.is_some_and(|d| d != a) || c.is_some_and(|c| c != a) {
                out.push(format!(
                    "request {n}, `{}` ({}): Rust server {a}{}{}",
                    iface.ops[k].name,
                    r.what,
                    d.map(|d| format!(", dynamic {d}")).unwrap_or_default(),
                    c.map(|c| format!(", C {c}")).unwrap_or_default()
                ));
            }
        }
        drop(rust_c);
        drop(dyn_c);
        rust.join()
            .expect("the Rust server thread")
            .expect("the Rust server ends cleanly");
        drain.join().expect("the report drain");
        if let Some(t) = dynt {
            t.join()
                .expect("the dynamic server thread")
                .expect("the dynamic server ends cleanly");
        }
    });
    if let Some((client, child)) = c_side {
        drop(client);
        let o = child.wait_with_output().expect("wait for the C server");
        assert!(
            o.status.success(),
            "{}: the C server failed: {}",
            case.name,
            String::from_utf8_lossy(&o.stderr)
        );
    }
    (out, dyn_server.is_some())
}

#[test]
fn rust_c_and_dynamic_servers_refuse_the_same_requests() {
    let seed = env_u64("IDL_PROPTEST_RUN_SEED").unwrap_or(DEFAULT_RUN_SEED);
    let requests = env_u64("IDL_DIFF_REQUESTS").map_or(DEFAULT_REQUESTS, |n| n as usize);
    let only = std::env::var("IDL_PROPTEST_ONLY").ok();
    let gcc = have_gcc();
    let dir =
        TempDir(std::env::temp_dir().join(format!("idl-differential-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).expect("create the temp dir");
    let mut failures = Vec::new();
    let mut ran = 0;
    let mut dynamic = 0;
    let mut tally = std::collections::BTreeMap::new();
    for (i, case) in CASES.iter().enumerate() {
        if only.as_deref().is_some_and(|o| o != case.name) {
            continue;
        }
        ran += 1;
        let text = std::fs::read_to_string(case.idl_path).expect("the build's IDL file");
        let exe = gcc.then(|| c_server(&dir.0, case, &text));
        let mut r = Rng::fork(seed, i as u64);
        let (d, with_dynamic) = differ(case, r.next_u64(), requests, exe.as_deref(), &mut tally);
        dynamic += usize::from(with_dynamic);
        if !d.is_empty() {
            failures.push(format!(
                "{} ({}), {} of {requests} requests:\n  {}",
                case.name,
                case.idl_path,
                d.len(),
                d.join("\n  ")
            ));
        }
    }
    eprintln!(
        "{ran} interfaces, {requests} requests each, servers: Rust, dynamic ({dynamic} interfaces){}",
        if gcc { ", C" } else { " (no gcc: C left out)" }
    );
    for (answer, n) in &tally {
        eprintln!("  {n:5} {answer}");
    }
    assert!(
        failures.is_empty(),
        "the servers disagree (IDL_PROPTEST_RUN_SEED={seed:#x}):\n{}",
        failures.join("\n")
    );
}
