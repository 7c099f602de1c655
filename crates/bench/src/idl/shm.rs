//! The two-process carrier: `idl::rt::shm`'s channel, with the server in a
//! child process (this same executable, re-run with [`SERVE_ENV`] naming
//! the stub family and [`FD_ENV`] the channel's inherited `memfd`).
//!
//! The peers' bytes travel in the channel's message buffer through the
//! [`Wire`] trait ([`ShmWire`]); fastpath's generated stubs use the
//! channel's own [`ClientTransport`] and string area; the raw family is the
//! channel's `call_raw`/`serve_raw` with no stub.

use std::os::fd::AsRawFd;
use std::process::{Child, Command, Stdio};

use idl::rt::shm::{self, ClientEnd, Config, ServerEnd};
use idl::rt::{CallError, ClientTransport, ServerTransport, Status};

use super::server::Pfs;
use super::wire::{Error, KEY_READ, Service, Wire};

/// The environment variable that makes this executable a server child:
/// the family it serves.
pub const SERVE_ENV: &str = "FASTPATH_IDL_SERVE";
/// The environment variable holding the channel's descriptor number.
pub const FD_ENV: &str = "FASTPATH_IDL_FD";

/// The channel's configuration for the suite: a message buffer that holds
/// a peer's 4 KiB read reply, a 64 KiB string area.
pub fn config() -> Config {
    Config {
        capacity: 8192,
        area: 64 << 10,
        ..Config::default()
    }
}

fn terr(e: CallError) -> Error {
    match e {
        CallError::Status(s) => Error::Status(s as u16),
        e => Error::Transport(e.to_string()),
    }
}

/// A [`Wire`] over the client end of a channel.
pub struct ShmWire {
    /// The channel.
    pub end: ClientEnd,
}

impl Wire for ShmWire {
    fn msg(&mut self) -> &mut [u8] {
        let cap = self.end.capacity();
        let p = self.end.buf();
        // SAFETY: `ClientTransport`'s contract: `buf` points to `capacity`
        // bytes, 8-aligned, valid until the next `&mut` call on the end,
        // which the returned borrow of `self` excludes; any bytes are valid
        // `u8`s (the server process writes them only between our call and
        // its reply, while no such borrow is alive).
        unsafe { std::slice::from_raw_parts_mut(p.as_ptr(), cap) }
    }

    fn call(&mut self, key: u16, len: usize) -> Result<usize, Error> {
        self.end.call(key, len).map_err(terr)
    }
}

/// Serves a [`Service`] on a channel until the client closes it.
pub fn serve_service<S: Service>(end: &mut ServerEnd, s: &mut S) -> Result<(), CallError> {
    loop {
        let (key, len) = match end.wait() {
            Ok(r) => r,
            Err(CallError::Closed) => return Ok(()),
            Err(e) => return Err(e),
        };
        let cap = end.capacity();
        let p = end.buf();
        // SAFETY: `ServerTransport`'s contract: from `wait` to `reply` the
        // buffer is `capacity` bytes, 8-aligned, ours; any bytes are valid.
        let msg = unsafe { std::slice::from_raw_parts_mut(p.as_ptr(), cap) };
        match s.serve(key, msg, len) {
            Ok(n) => end.reply(Status::Ok, n, 0..0)?,
            Err(w) => end.reply(Status::from_wire(w).unwrap_or(Status::BadValue), 0, 0..0)?,
        }
    }
}

/// The raw server: no stub. A read copies the file's bytes into the
/// message buffer after a 24-byte record (the data move every family
/// makes); any other request is answered with `reply_len(key, len)` bytes
/// left as they are.
pub fn serve_raw(end: &mut ServerEnd) -> Result<(), CallError> {
    let pfs = Pfs::new();
    end.serve_raw(|key, buf, len| {
        if key == KEY_READ {
            let off = i32::from_ne_bytes([buf[4], buf[5], buf[6], buf[7]]);
            let span = pfs.read_span(off, super::server::READ_BYTES as i32);
            let n = (24 + span.len()).min(buf.len());
            buf[24..n].copy_from_slice(&span[..n - 24]);
            n
        } else {
            raw_reply_len(key, len)
        }
    })
}

/// The raw family's request and reply lengths for each call: the bytes
/// fastpath's stubs move (record plus the array's bytes) for the suite's
/// arrays of [`super::count::TABLE4_INTS`] ints.
pub fn raw_lens(key: u16) -> (usize, usize) {
    let data = 4 * super::count::TABLE4_INTS;
    match key {
        super::wire::KEY_OPEN => (16, 24),
        super::wire::KEY_WRITE => (20 + data, 24),
        super::wire::KEY_DIRENTRIES => (12, 24 + data),
        _ => (0, 0),
    }
}

/// The reply length of the raw family for a request.
pub fn raw_reply_len(key: u16, len: usize) -> usize {
    match key {
        super::wire::KEY_NULL => 0,
        super::wire::KEY_OPEN | super::wire::KEY_WRITE | super::wire::KEY_DIRENTRIES => {
            raw_lens(key).1
        }
        _ => len,
    }
}

/// The first two CPUs the calling thread may run on: the client's and the
/// servers'. The timed part pins each side to its own ([`pinning`],
/// [`unet::affinity`]), because the kernel tends to move a task woken by
/// a futex onto its waker's CPU, where a spinning client and its server
/// then share one core and every hand-off waits for a time slice (16 to
/// 19 µs a call on the idle Intel Xeon guest, in one or two of the six
/// families of every unpinned `fastpath bench idl --quick`).
pub fn cpus() -> Option<(usize, usize)> {
    unet::affinity::two_cpus().map(|[a, b]| (a, b))
}

/// The client's and the servers' CPUs ([`cpus`]) if this part pins them:
/// by `default`, unless [`PIN_ENV`] says `0` (no) or anything else (yes).
/// Asked once, before the client's thread pins itself: once pinned, its
/// mask has one CPU, and a server child, which inherits that mask, would
/// stay on the client's CPU. (Until 2026-12-06 each spawn asked again,
/// after the pin: every call of `FASTPATH_IDL_PIN=1 fastpath bench idl`
/// took 16.7 µs, a futex hand-off on one core, against some 250 ns.)
pub fn pinning(default: bool) -> Option<(usize, usize)> {
    let on = std::env::var_os(PIN_ENV).map_or(default, |v| v != "0");
    on.then(cpus).flatten()
}

/// The environment variable that says whether to pin the client and the
/// servers to two CPUs: `0` not, anything else yes ([`pinning`]). Unset,
/// the round trips and IOzone pin them and the waiting table does not.
pub const PIN_ENV: &str = "FASTPATH_IDL_PIN";

/// The environment variable naming the CPU a server child pins itself to.
pub const CPU_ENV: &str = "FASTPATH_IDL_CPU";

/// A server child process and the client end of its channel.
pub struct Child2 {
    /// The client end.
    pub end: Option<ClientEnd>,
    child: Child,
}

impl Child2 {
    /// Starts this executable as the server of `family` on a new channel,
    /// unpinned.
    pub fn spawn(family: &str) -> Result<Child2, String> {
        Child2::spawn_with(family, &config(), None)
    }

    /// The same on a channel of `config` (e.g. `spin` 0: a futex-only
    /// channel, both sides reading the spin count from its header), the
    /// server pinned to `cpu` if given (it pins itself, [`CPU_ENV`]).
    pub fn spawn_with(family: &str, config: &Config, cpu: Option<usize>) -> Result<Child2, String> {
        // The parent holds the memfd and its client end only: a server end
        // closes the channel when dropped.
        let memfd = shm::create(config).map_err(|e| e.to_string())?;
        let fd = shm::inheritable(&memfd).map_err(|e| e.to_string())?;
        let end = ClientEnd::from_fd(memfd).map_err(|e| e.to_string())?;
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let mut cmd = Command::new(exe);
        if let Some(cpu) = cpu {
            cmd.env(CPU_ENV, cpu.to_string());
        }
        let child = cmd
            .args(std::env::args_os().skip(1))
            .env(SERVE_ENV, family)
            .env(FD_ENV, fd.as_raw_fd().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| format!("spawning the {family} server: {e}"))?;
        drop(fd);
        Ok(Child2 {
            end: Some(end),
            child,
        })
    }
}

impl Drop for Child2 {
    fn drop(&mut self) {
        if let Some(e) = self.end.take() {
            e.close();
        }
        let _ = self.child.wait();
    }
}

/// If this process is a server child, serves and returns its exit code.
pub fn child_main() -> Option<i32> {
    let family = std::env::var(SERVE_ENV).ok()?;
    if let Some(cpu) = std::env::var(CPU_ENV).ok().and_then(|c| c.parse().ok()) {
        unet::affinity::pin(cpu);
    }
    // SAFETY: the parent passed this descriptor for this purpose, and
    // nothing else in this process knows its number.
    let fd = match unsafe { shm::fd_from_env(FD_ENV) } {
        Ok(fd) => fd,
        Err(e) => {
            eprintln!("idl server child: {e}");
            return Some(2);
        }
    };
    let mut end = match ServerEnd::from_fd(fd) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("idl server child: {e}");
            return Some(2);
        }
    };
    let r = match family.as_str() {
        "raw" => serve_raw(&mut end),
        "prost" => serve_service(&mut end, &mut super::prost_peer::Server::default()),
        "capnp" => serve_service(&mut end, &mut super::capnp_peer::Server::default()),
        "flatbuffers" => serve_service(&mut end, &mut super::flat_peer::Server::default()),
        "hand-written" => serve_service(&mut end, &mut super::hand::Server::default()),
        other => super::fastpath_family::serve(other, &mut end),
    };
    match r {
        Ok(()) => Some(0),
        Err(e) => {
            eprintln!("idl server child ({family}): {e}");
            Some(1)
        }
    }
}
