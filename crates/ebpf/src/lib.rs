//! # ebpf: a small Linux eBPF interface
//!
//! What fastpath needs from the kernel's eBPF machinery to run generated
//! packet classifiers in the driver (XDP) and feed AF_XDP sockets, and no
//! more:
//!
//! | piece | module / type |
//! |---|---|
//! | instructions, an assembler with labels | [`insn`] ([`Asm`], [`Insn`]) |
//! | maps: array, hash, XSKMAP; update, lookup, delete | [`Map`] |
//! | program load (XDP, socket filter), the verifier's log on refusal | [`Program::load`] |
//! | `BPF_PROG_TEST_RUN`: a packet in, the verdict and packet out, timing | [`Program::test_run`] |
//! | XDP attach by `BPF_LINK_CREATE`, atomic replace by `BPF_LINK_UPDATE`, detach on drop | [`XdpLink`] |
//! | the "to XSKMAP\[rx_queue_index\], else pass" program | [`xsk_redirect`] |
//!
//! Programs are built from raw instructions and loaded without ELF, BTF or
//! libbpf. Of the maintained crates, `aya` loads programs only from ELF
//! objects (its syscall layer is private), and `libbpf-rs` / `libbpf-sys`
//! bind the C libbpf, whose raw loader (`bpf_prog_load`) would add a C
//! library to the build for eight system calls; so this crate makes them
//! itself, in the one `unsafe` module [`sys`].
//!
//! Dependencies: `libc` (the system call and its constants), `thiserror`.
//!
//! ```no_run
//! use ebpf::{Map, Program, XdpLink, XdpMode};
//! let xsks = Map::xsk(4, "xsks")?;
//! let prog = ebpf::xsk_redirect(&xsks)?;
//! let link = XdpLink::attach(&prog, ebpf::ifindex("veth0")?, XdpMode::Skb)?;
//! // ... put AF_XDP socket fds into `xsks` with Map::update ...
//! drop(link); // detaches
//! # Ok::<(), ebpf::Error>(())
//! ```

pub mod insn;
pub mod sys;

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use thiserror::Error;

pub use insn::{Alu, Asm, AsmError, Cond, Helper, Insn, Label, Reg, Src, Width};

/// XDP verdicts (`enum xdp_action`).
pub mod xdp {
    /// An error: drop the frame and count an exception.
    pub const ABORTED: u32 = 0;
    /// Drop the frame.
    pub const DROP: u32 = 1;
    /// Give the frame to the kernel's stack.
    pub const PASS: u32 = 2;
    /// Send the frame back out of the interface it came in on.
    pub const TX: u32 = 3;
    /// Redirect the frame (to another interface, CPU or AF_XDP socket).
    pub const REDIRECT: u32 = 4;
}

/// The byte offsets of `struct xdp_md`, the XDP program's context (`r1`).
pub mod xdp_md {
    /// `data`: the frame's first byte (a packet pointer once loaded).
    pub const DATA: i16 = 0;
    /// `data_end`: one past the frame's last byte.
    pub const DATA_END: i16 = 4;
    /// `ingress_ifindex`.
    pub const INGRESS_IFINDEX: i16 = 12;
    /// `rx_queue_index`: the receive queue the frame arrived on.
    pub const RX_QUEUE_INDEX: i16 = 16;
    /// The context's size.
    pub const SIZE: usize = 24;
}

/// A bpf(2) command, named in errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmd {
    /// `BPF_MAP_CREATE`.
    MapCreate,
    /// `BPF_MAP_UPDATE_ELEM`.
    MapUpdate,
    /// `BPF_MAP_LOOKUP_ELEM`.
    MapLookup,
    /// `BPF_MAP_DELETE_ELEM`.
    MapDelete,
    /// `BPF_PROG_LOAD`.
    ProgLoad,
    /// `BPF_PROG_TEST_RUN`.
    ProgTestRun,
    /// `BPF_LINK_CREATE`.
    LinkCreate,
    /// `BPF_LINK_UPDATE`.
    LinkUpdate,
}

impl std::fmt::Display for Cmd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Cmd::MapCreate => "BPF_MAP_CREATE",
            Cmd::MapUpdate => "BPF_MAP_UPDATE_ELEM",
            Cmd::MapLookup => "BPF_MAP_LOOKUP_ELEM",
            Cmd::MapDelete => "BPF_MAP_DELETE_ELEM",
            Cmd::ProgLoad => "BPF_PROG_LOAD",
            Cmd::ProgTestRun => "BPF_PROG_TEST_RUN",
            Cmd::LinkCreate => "BPF_LINK_CREATE",
            Cmd::LinkUpdate => "BPF_LINK_UPDATE",
        })
    }
}

/// What went wrong, with the command and errno where the kernel refused.
#[derive(Debug, Error)]
pub enum Error {
    /// The kernel refused a command.
    #[error("bpf({cmd}) failed{}: {source}", context_suffix(.context))]
    Bpf {
        /// The command.
        cmd: Cmd,
        /// What it was about (a map or program name, an interface), or empty.
        context: String,
        /// The errno, as an I/O error.
        #[source]
        source: io::Error,
    },
    /// The verifier refused a program; its log says why.
    #[error("the verifier refused program {name} (errno {errno}): {}", last_lines(.log))]
    Verifier {
        /// The program's name.
        name: String,
        /// The errno of `BPF_PROG_LOAD` (usually `EACCES` or `EINVAL`).
        errno: i32,
        /// The verifier's log (level 1).
        log: String,
    },
    /// A key or value of the wrong size for its map.
    #[error("map {map}: a {what} of {got} bytes, but the map's are {want}")]
    Size {
        /// The map's name.
        map: String,
        /// "key" or "value".
        what: &'static str,
        /// The size passed.
        got: usize,
        /// The map's size.
        want: u32,
    },
    /// A test run's packet is shorter than an XDP frame can be.
    #[error(
        "a test-run packet of {len} bytes is shorter than the 14-byte Ethernet header XDP requires"
    )]
    ShortPacket {
        /// Its length.
        len: usize,
    },
    /// An interface name that does not exist (or is not a valid name).
    #[error("no network interface named {name:?}: {source}")]
    NoInterface {
        /// The name.
        name: String,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A program that could not be assembled.
    #[error(transparent)]
    Asm(#[from] AsmError),
}

fn context_suffix(c: &str) -> String {
    if c.is_empty() {
        String::new()
    } else {
        format!(" for {c}")
    }
}

/// The verifier's verdict is at the end of its log; a message shows the
/// last few lines.
fn last_lines(log: &str) -> String {
    let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
    let from = lines.len().saturating_sub(4);
    lines[from..].join(" / ")
}

impl Error {
    /// The errno behind the error, if the kernel gave one.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Error::Bpf { source, .. } => source.raw_os_error(),
            Error::Verifier { errno, .. } => Some(*errno),
            Error::NoInterface { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }

    /// Whether the kernel refused for lack of privilege (`EPERM`) or has
    /// no bpf(2) (`ENOSYS`): the cases where callers fall back or skip.
    pub fn is_unsupported(&self) -> bool {
        matches!(self.errno(), Some(libc::EPERM) | Some(libc::ENOSYS))
    }
}

fn bpf_err(cmd: Cmd, context: &str) -> impl FnOnce(io::Error) -> Error + '_ {
    move |source| Error::Bpf {
        cmd,
        context: context.to_string(),
        source,
    }
}

/// The kind of a [`Map`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapType {
    /// `BPF_MAP_TYPE_HASH`.
    Hash,
    /// `BPF_MAP_TYPE_ARRAY`: u32 keys `0..max_entries`, every entry present.
    Array,
    /// `BPF_MAP_TYPE_XSKMAP`: u32 queue keys, AF_XDP socket fd values
    /// (write-only from user space), the target of `bpf_redirect_map`.
    Xsk,
}

impl MapType {
    fn raw(self) -> u32 {
        match self {
            MapType::Hash => 1,
            MapType::Array => 2,
            MapType::Xsk => 17,
        }
    }
}

/// How [`Map::update`] treats an existing entry (`BPF_ANY`, `BPF_NOEXIST`,
/// `BPF_EXIST`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Update {
    /// Create or replace.
    Any = 0,
    /// Create only (`EEXIST` if present).
    NoExist = 1,
    /// Replace only (`ENOENT` if absent).
    Exist = 2,
}

/// A BPF map, closed on drop (programs that use it keep it alive in the
/// kernel).
#[derive(Debug)]
pub struct Map {
    fd: sys::MapFd,
    kind: MapType,
    max_entries: u32,
    name: String,
}

impl Map {
    /// Creates a map.
    pub fn create(
        kind: MapType,
        key_size: u32,
        value_size: u32,
        max_entries: u32,
        name: &str,
    ) -> Result<Map, Error> {
        let fd = sys::map_create(kind.raw(), key_size, value_size, max_entries, name)
            .map_err(bpf_err(Cmd::MapCreate, name))?;
        Ok(Map {
            fd,
            kind,
            max_entries,
            name: name.to_string(),
        })
    }

    /// An array of `max_entries` values of `value_size` bytes.
    pub fn array(value_size: u32, max_entries: u32, name: &str) -> Result<Map, Error> {
        Map::create(MapType::Array, 4, value_size, max_entries, name)
    }

    /// A hash table.
    pub fn hash(
        key_size: u32,
        value_size: u32,
        max_entries: u32,
        name: &str,
    ) -> Result<Map, Error> {
        Map::create(MapType::Hash, key_size, value_size, max_entries, name)
    }

    /// An XSKMAP of `queues` entries: key = queue index, value = an
    /// AF_XDP socket fd (see [`Map::set_xsk`]).
    pub fn xsk(queues: u32, name: &str) -> Result<Map, Error> {
        Map::create(MapType::Xsk, 4, 4, queues, name)
    }

    /// The map's kind.
    pub fn kind(&self) -> MapType {
        self.kind
    }

    /// The number of entries it was created with.
    pub fn max_entries(&self) -> u32 {
        self.max_entries
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The descriptor, for [`Asm::ld_map_fd`].
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.fd()
    }

    fn check(&self, what: &'static str, got: usize, want: u32) -> Result<(), Error> {
        if got == want as usize {
            Ok(())
        } else {
            Err(Error::Size {
                map: self.name.clone(),
                what,
                got,
                want,
            })
        }
    }

    /// Sets `key` to `value`.
    pub fn update(&self, key: &[u8], value: &[u8], how: Update) -> Result<(), Error> {
        self.check("key", key.len(), self.fd.key_size())?;
        self.check("value", value.len(), self.fd.value_size())?;
        sys::map_update(&self.fd, key, value, how as u64)
            .map_err(bpf_err(Cmd::MapUpdate, &self.name))
    }

    /// The value at `key`, or `None` when there is none.
    pub fn lookup(&self, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        self.check("key", key.len(), self.fd.key_size())?;
        let mut value = vec![0u8; self.fd.value_size() as usize];
        match sys::map_lookup(&self.fd, key, &mut value) {
            Ok(()) => Ok(Some(value)),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
            Err(e) => Err(bpf_err(Cmd::MapLookup, &self.name)(e)),
        }
    }

    /// Removes `key`: `true` if it was there.
    pub fn delete(&self, key: &[u8]) -> Result<bool, Error> {
        self.check("key", key.len(), self.fd.key_size())?;
        match sys::map_delete(&self.fd, key) {
            Ok(()) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
            Err(e) => Err(bpf_err(Cmd::MapDelete, &self.name)(e)),
        }
    }

    /// Puts the AF_XDP socket `xsk` at `queue` of an XSKMAP.
    pub fn set_xsk(&self, queue: u32, xsk: BorrowedFd<'_>) -> Result<(), Error> {
        self.update(
            &queue.to_ne_bytes(),
            &(xsk.as_raw_fd() as u32).to_ne_bytes(),
            Update::Any,
        )
    }
}

/// The kind of a [`Program`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgType {
    /// `BPF_PROG_TYPE_XDP`, expected attach type `BPF_XDP`.
    Xdp,
    /// `BPF_PROG_TYPE_SOCKET_FILTER` (what a classic BPF socket filter
    /// becomes in the kernel); its context is a `struct __sk_buff`. In a
    /// test run its packet starts at the network header.
    SocketFilter,
    /// `BPF_PROG_TYPE_SCHED_CLS` (a tc classifier): a `struct __sk_buff`
    /// context like a socket filter's, the legacy packet loads allowed, and
    /// in a test run the packet starts at the link header.
    SchedCls,
}

/// A loaded program, unloaded when dropped and no link runs it.
#[derive(Debug)]
pub struct Program {
    fd: OwnedFd,
    kind: ProgType,
    name: String,
    len: usize,
    frags: bool,
}

/// `BPF_F_XDP_HAS_FRAGS`: the XDP program copes with multi-buffer frames
/// (its direct packet access sees the first buffer only).
const BPF_F_XDP_HAS_FRAGS: u32 = 1 << 5;

/// The size of the verifier log buffer tried first, and the largest.
const LOG_START: usize = 64 * 1024;
const LOG_MAX: usize = 16 * 1024 * 1024;

impl Program {
    /// Loads `insns` as a GPL program of `kind`. On refusal by the
    /// verifier the load is repeated with a log, returned in
    /// [`Error::Verifier`].
    pub fn load(kind: ProgType, insns: &[Insn], name: &str) -> Result<Program, Error> {
        Program::load_flags(kind, insns, name, 0)
    }

    fn load_flags(
        kind: ProgType,
        insns: &[Insn],
        name: &str,
        flags: u32,
    ) -> Result<Program, Error> {
        let frags = flags & BPF_F_XDP_HAS_FRAGS != 0;
        let (ptype, attach) = match kind {
            ProgType::Xdp => (6, 37),
            ProgType::SocketFilter => (1, 0),
            ProgType::SchedCls => (3, 0),
        };
        let license = c"GPL";
        match sys::prog_load(ptype, attach, flags, insns, license, name, None) {
            Ok(fd) => {
                return Ok(Program {
                    fd,
                    kind,
                    name: name.to_string(),
                    len: insns.len(),
                    frags,
                });
            }
            Err(e) if !matches!(e.raw_os_error(), Some(libc::EACCES) | Some(libc::EINVAL)) => {
                return Err(bpf_err(Cmd::ProgLoad, name)(e));
            }
            Err(_) => {}
        }
        let mut size = LOG_START;
        loop {
            let mut log = vec![0u8; size];
            match sys::prog_load(ptype, attach, flags, insns, license, name, Some(&mut log)) {
                Ok(fd) => {
                    return Ok(Program {
                        fd,
                        kind,
                        name: name.to_string(),
                        len: insns.len(),
                        frags,
                    });
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) && size < LOG_MAX => size *= 4,
                Err(e) => {
                    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                    return Err(Error::Verifier {
                        name: name.to_string(),
                        errno: e.raw_os_error().unwrap_or(0),
                        log: String::from_utf8_lossy(&log[..end]).into_owned(),
                    });
                }
            }
        }
    }

    /// Loads an XDP program.
    pub fn load_xdp(insns: &[Insn], name: &str) -> Result<Program, Error> {
        Program::load(ProgType::Xdp, insns, name)
    }

    /// Loads an XDP program that copes with multi-buffer frames
    /// (`BPF_F_XDP_HAS_FRAGS`, Linux 5.18): a driver then hands it frames
    /// larger than a page, its packet pointers covering the first buffer
    /// only (veth attaches a program without it only while the peer's MTU
    /// fits one page), and an `AF_XDP` socket bound with `XDP_USE_SG`
    /// receives them as chains of descriptors.
    pub fn load_xdp_frags(insns: &[Insn], name: &str) -> Result<Program, Error> {
        Program::load_flags(ProgType::Xdp, insns, name, BPF_F_XDP_HAS_FRAGS)
    }

    /// Whether it was loaded with [`Program::load_xdp_frags`].
    pub fn has_frags(&self) -> bool {
        self.frags
    }

    /// The program's kind.
    pub fn kind(&self) -> ProgType {
        self.kind
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its length in instruction slots.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no instructions (never, for a loaded program).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The descriptor.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Runs the program in the kernel (`BPF_PROG_TEST_RUN`) on one packet.
    pub fn test_run(&self, run: &TestRun<'_>) -> Result<TestOutcome, Error> {
        if self.kind == ProgType::Xdp && run.packet.len() < 14 {
            return Err(Error::ShortPacket {
                len: run.packet.len(),
            });
        }
        // Room for a program that grows the frame (XDP tail room).
        let mut out = vec![0u8; run.packet.len() + 4096];
        let ctx;
        let ctx_in = match (self.kind, run.rx_queue_index, run.ingress_ifindex) {
            (ProgType::Xdp, q, i) if q != 0 || i != 0 => {
                let mut c = [0u8; xdp_md::SIZE];
                c[4..8].copy_from_slice(&(run.packet.len() as u32).to_ne_bytes());
                c[12..16].copy_from_slice(&i.to_ne_bytes());
                c[16..20].copy_from_slice(&q.to_ne_bytes());
                ctx = c;
                Some(&ctx[..])
            }
            _ => None,
        };
        let r = sys::prog_test_run(self.fd(), run.packet, &mut out, ctx_in, run.repeat.max(1))
            .map_err(bpf_err(Cmd::ProgTestRun, &self.name))?;
        out.truncate(r.data_size_out as usize);
        Ok(TestOutcome {
            verdict: r.retval,
            packet: out,
            mean: Duration::from_nanos(u64::from(r.duration_ns)),
        })
    }
}

/// One `BPF_PROG_TEST_RUN` request.
#[derive(Clone, Copy, Debug)]
pub struct TestRun<'a> {
    /// The frame.
    pub packet: &'a [u8],
    /// How many times to run it (the kernel times them all); 0 means 1.
    pub repeat: u32,
    /// The `rx_queue_index` the program sees (XDP; non-zero needs
    /// `ingress_ifindex` of a device with that many queues).
    pub rx_queue_index: u32,
    /// The `ingress_ifindex` the program sees (XDP), or 0.
    pub ingress_ifindex: u32,
}

impl<'a> TestRun<'a> {
    /// One run on `packet`, queue 0, no interface.
    pub fn new(packet: &'a [u8]) -> TestRun<'a> {
        TestRun {
            packet,
            repeat: 1,
            rx_queue_index: 0,
            ingress_ifindex: 0,
        }
    }

    /// The same, run `repeat` times.
    pub fn repeat(mut self, repeat: u32) -> TestRun<'a> {
        self.repeat = repeat;
        self
    }
}

/// What a test run gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestOutcome {
    /// The program's return value (for XDP, one of [`xdp`]).
    pub verdict: u32,
    /// The packet as the program left it.
    pub packet: Vec<u8>,
    /// The kernel's mean time per run.
    pub mean: Duration,
}

/// The XDP attach mode (`XDP_FLAGS_*_MODE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XdpMode {
    /// The driver's native mode if it has one, else generic.
    Auto,
    /// Generic XDP in the kernel's receive path (every driver; a copy).
    Skb,
    /// The driver's native XDP (`EOPNOTSUPP` when it has none).
    Driver,
}

impl XdpMode {
    fn flags(self) -> u32 {
        match self {
            XdpMode::Auto => 0,
            XdpMode::Skb => 1 << 1,
            XdpMode::Driver => 1 << 2,
        }
    }
}

/// An XDP program attached to an interface through a BPF link; dropping
/// it detaches the program.
#[derive(Debug)]
pub struct XdpLink {
    fd: OwnedFd,
    ifindex: u32,
    mode: XdpMode,
}

impl XdpLink {
    /// Attaches `prog` (an XDP program) to the interface `ifindex`.
    pub fn attach(prog: &Program, ifindex: u32, mode: XdpMode) -> Result<XdpLink, Error> {
        let fd = sys::link_create(prog.fd(), ifindex, 37, mode.flags()).map_err(|e| {
            bpf_err(
                Cmd::LinkCreate,
                &format!("{} on ifindex {ifindex}", prog.name),
            )(e)
        })?;
        Ok(XdpLink { fd, ifindex, mode })
    }

    /// Replaces the attached program with `prog` atomically: every frame
    /// is classified by the old program or the new one.
    pub fn update(&self, prog: &Program) -> Result<(), Error> {
        sys::link_update(self.fd.as_fd(), prog.fd(), None)
            .map_err(bpf_err(Cmd::LinkUpdate, &prog.name))
    }

    /// Replaces `old` with `new` only if `old` is still the attached
    /// program (`EPERM` otherwise).
    pub fn replace(&self, old: &Program, new: &Program) -> Result<(), Error> {
        sys::link_update(self.fd.as_fd(), new.fd(), Some(old.fd()))
            .map_err(bpf_err(Cmd::LinkUpdate, &new.name))
    }

    /// The interface.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// The mode it was attached in.
    pub fn mode(&self) -> XdpMode {
        self.mode
    }
}

/// The index of the interface `name`.
pub fn ifindex(name: &str) -> Result<u32, Error> {
    let c = CString::new(name).map_err(|_| Error::NoInterface {
        name: name.to_string(),
        source: io::Error::from_raw_os_error(libc::EINVAL),
    })?;
    sys::if_nametoindex(&c).map_err(|source| Error::NoInterface {
        name: name.to_string(),
        source,
    })
}

/// The instructions of the XDP program "redirect to `xsks[rx_queue_index]`,
/// else `XDP_PASS`": `return bpf_redirect_map(xsks, ctx->rx_queue_index,
/// XDP_PASS)`. A queue without a socket in the map passes its frames to
/// the kernel's stack.
pub fn xsk_redirect_insns(xsks: &Map) -> Vec<Insn> {
    let mut a = Asm::new();
    a.ldx(Width::W, Reg::R2, Reg::R1, xdp_md::RX_QUEUE_INDEX);
    a.ld_map_fd(Reg::R1, xsks.fd().as_raw_fd());
    a.mov64(Reg::R3, Src::Imm(xdp::PASS as i32));
    a.call(Helper::REDIRECT_MAP);
    a.exit();
    a.finish()
        .expect("a fixed program without labels assembles")
}

/// Loads [`xsk_redirect_insns`] as an XDP program named `xsk_redirect`.
pub fn xsk_redirect(xsks: &Map) -> Result<Program, Error> {
    Program::load_xdp(&xsk_redirect_insns(xsks), "xsk_redirect")
}

/// Whether this process may use bpf(2) for XDP: `Ok(())`, or why not
/// (not root, or the kernel refused a trivial XDP program). Tests use it
/// to skip with a printed reason.
pub fn probe() -> Result<(), String> {
    if !sys::is_root() {
        return Err("not running as root".to_string());
    }
    let mut a = Asm::new();
    a.ret(xdp::PASS as i32);
    let insns = a.finish().map_err(|e| e.to_string())?;
    Program::load_xdp(&insns, "probe")
        .map(drop)
        .map_err(|e| format!("the kernel refused a trivial XDP program: {e}"))
}
