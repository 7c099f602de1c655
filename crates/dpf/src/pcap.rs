//! libpcap, loaded at run time: the oracle of the differential tests (of
//! filters, and of which packets a capture file holds:
//! [`Libpcap::read_offline`]) and the peer of `fastpath bench dpf`.
//!
//! The library is opened with `libloading` (`libpcap.so.1`,
//! `libpcap.so.0.8` or `libpcap.so`), so that dpf builds and runs where
//! libpcap is missing; [`Libpcap::load`] then returns
//! [`Error::LibpcapUnavailable`] and the callers skip. Filters are compiled
//! the way `tcpdump` compiles them for an Ethernet capture:
//! `pcap_open_dead(DLT_EN10MB, 65535)` and
//! `pcap_compile(p, &prog, expr, optimize = 1, PCAP_NETMASK_UNKNOWN)`, as
//! documented in pcap_compile(3PCAP) and pcap_offline_filter(3PCAP).
//!
//! This module is the only one of the crate with `unsafe`: the calls into
//! the C library.

use std::ffi::{CStr, CString, c_char, c_int, c_long, c_uint, c_void};
use std::fmt;

use libloading::Library;

use crate::error::Error;

/// One classic BPF instruction (`struct bpf_insn`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BpfInsn {
    /// The opcode.
    pub code: u16,
    /// The jump offset when the condition holds.
    pub jt: u8,
    /// The jump offset when it does not.
    pub jf: u8,
    /// The constant operand.
    pub k: u32,
}

/// `struct bpf_program`.
#[repr(C)]
struct BpfProgramRaw {
    bf_len: c_uint,
    bf_insns: *mut BpfInsn,
}

/// `struct pcap_pkthdr`; `ts` is a `struct timeval` (two `long`s on the
/// Unix targets libpcap supports).
#[repr(C)]
struct PktHdr {
    ts_sec: c_long,
    ts_usec: c_long,
    caplen: u32,
    len: u32,
}

/// The link type of Ethernet captures.
pub const DLT_EN10MB: c_int = 1;
/// The snapshot length filters are compiled for (`ret #65535` accepts).
pub const SNAPLEN: c_int = 65535;
const PCAP_NETMASK_UNKNOWN: u32 = 0xffff_ffff;

type OpenDeadFn = unsafe extern "C" fn(c_int, c_int) -> *mut c_void;
type CompileFn =
    unsafe extern "C" fn(*mut c_void, *mut BpfProgramRaw, *const c_char, c_int, u32) -> c_int;
type OfflineFilterFn =
    unsafe extern "C" fn(*const BpfProgramRaw, *const PktHdr, *const u8) -> c_int;
type FreeCodeFn = unsafe extern "C" fn(*mut BpfProgramRaw);
type GetErrFn = unsafe extern "C" fn(*mut c_void) -> *mut c_char;
type CloseFn = unsafe extern "C" fn(*mut c_void);
type BpfFilterFn = unsafe extern "C" fn(*const BpfInsn, *const u8, c_uint, c_uint) -> c_uint;
type BpfImageFn = unsafe extern "C" fn(*const BpfInsn, c_int) -> *mut c_char;
type OpenOfflineFn = unsafe extern "C" fn(*const c_char, *mut c_char) -> *mut c_void;
type NextExFn = unsafe extern "C" fn(*mut c_void, *mut *const PktHdr, *mut *const u8) -> c_int;
type DatalinkFn = unsafe extern "C" fn(*mut c_void) -> c_int;

/// `PCAP_ERRBUF_SIZE`.
const ERRBUF_SIZE: usize = 256;

/// What libpcap reads from a capture file ([`Libpcap::read_offline`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Offline {
    /// The link type (`pcap_datalink`, a DLT value).
    pub link_type: i32,
    /// The packets read: original length and captured bytes.
    pub packets: Vec<(u32, Vec<u8>)>,
    /// The error that ended reading early (`pcap_next_ex` returned -1),
    /// if one did.
    pub error: Option<String>,
}

/// A loaded libpcap with a dead Ethernet capture handle to compile for.
pub struct Libpcap {
    handle: *mut c_void,
    compile: CompileFn,
    offline_filter: OfflineFilterFn,
    freecode: FreeCodeFn,
    geterr: GetErrFn,
    close: CloseFn,
    bpf_filter: BpfFilterFn,
    bpf_image: BpfImageFn,
    open_offline: OpenOfflineFn,
    next_ex: NextExFn,
    datalink: DatalinkFn,
    version: String,
    // Declared last so that it is dropped after `Drop::drop` has closed
    // the handle; the function pointers above point into it.
    _lib: Library,
}

impl fmt::Debug for Libpcap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Libpcap")
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

/// The shared-object names tried, in order.
const NAMES: &[&str] = &[
    "libpcap.so.1",
    "libpcap.so.0.8",
    "libpcap.so",
    "libpcap.dylib",
];

impl Libpcap {
    /// Loads libpcap and opens a dead DLT_EN10MB handle.
    pub fn load() -> Result<Libpcap, Error> {
        let mut why = Vec::new();
        for name in NAMES {
            // SAFETY: loading libpcap runs its initializers, which only
            // set up its own state; it is a well-known system library.
            match unsafe { Library::new(name) } {
                Ok(lib) => return Self::from_library(lib),
                Err(e) => why.push(format!("{name}: {e}")),
            }
        }
        Err(Error::LibpcapUnavailable(why.join("; ")))
    }

    fn from_library(lib: Library) -> Result<Libpcap, Error> {
        fn sym<T: Copy>(lib: &Library, name: &str) -> Result<T, Error> {
            // SAFETY: every `T` this is called with is the function-pointer
            // type of the libpcap function of that name, as declared in
            // pcap/pcap.h and pcap/bpf.h; the pointer is used only while
            // `lib` is alive (it is stored beside it in `Libpcap`).
            unsafe { lib.get::<T>(name.as_bytes()) }
                .map(|s| *s)
                .map_err(|e| Error::LibpcapUnavailable(format!("{name}: {e}")))
        }
        let open_dead: OpenDeadFn = sym(&lib, "pcap_open_dead")?;
        let lib_version: unsafe extern "C" fn() -> *const c_char = sym(&lib, "pcap_lib_version")?;
        // SAFETY: pcap_lib_version takes no arguments and returns a
        // pointer to a static NUL-terminated string.
        let version = unsafe { CStr::from_ptr(lib_version()) }
            .to_string_lossy()
            .into_owned();
        let compile = sym(&lib, "pcap_compile")?;
        let offline_filter = sym(&lib, "pcap_offline_filter")?;
        let freecode = sym(&lib, "pcap_freecode")?;
        let geterr = sym(&lib, "pcap_geterr")?;
        let close = sym(&lib, "pcap_close")?;
        let bpf_filter = sym(&lib, "bpf_filter")?;
        let bpf_image = sym(&lib, "bpf_image")?;
        let open_offline = sym(&lib, "pcap_open_offline")?;
        let next_ex = sym(&lib, "pcap_next_ex")?;
        let datalink = sym(&lib, "pcap_datalink")?;
        // SAFETY: pcap_open_dead takes two ints and returns a new handle
        // or NULL; it touches no memory of ours.
        let handle = unsafe { open_dead(DLT_EN10MB, SNAPLEN) };
        if handle.is_null() {
            return Err(Error::LibpcapUnavailable("pcap_open_dead failed".into()));
        }
        Ok(Libpcap {
            handle,
            compile,
            offline_filter,
            freecode,
            geterr,
            close,
            bpf_filter,
            bpf_image,
            open_offline,
            next_ex,
            datalink,
            version,
            _lib: lib,
        })
    }

    /// libpcap's version string (`pcap_lib_version`).
    pub fn version(&self) -> &str {
        &self.version
    }

    /// Compiles a filter with optimization, as tcpdump does.
    pub fn compile(&self, expr: &str) -> Result<Bpf<'_>, Error> {
        let c =
            CString::new(expr).map_err(|_| Error::LibpcapCompile("filter contains NUL".into()))?;
        let mut prog = BpfProgramRaw {
            bf_len: 0,
            bf_insns: std::ptr::null_mut(),
        };
        // SAFETY: `handle` is a live pcap_t, `prog` a writable bpf_program
        // and `c` a NUL-terminated string; all outlive the call.
        let rc =
            unsafe { (self.compile)(self.handle, &mut prog, c.as_ptr(), 1, PCAP_NETMASK_UNKNOWN) };
        if rc != 0 {
            // SAFETY: pcap_geterr returns the handle's NUL-terminated error
            // buffer, valid until the next call on the handle; it is copied
            // at once.
            let msg = unsafe { CStr::from_ptr((self.geterr)(self.handle)) }
                .to_string_lossy()
                .into_owned();
            return Err(Error::LibpcapCompile(msg));
        }
        Ok(Bpf { pcap: self, prog })
    }
}

impl Libpcap {
    /// Reads a capture file the way `tcpdump -r` does (`pcap_open_offline`,
    /// then `pcap_next_ex` to the end or the first error): the oracle for
    /// which packets a file holds.
    pub fn read_offline(&self, path: &std::path::Path) -> Result<Offline, Error> {
        use std::os::unix::ffi::OsStrExt;
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| Error::LibpcapOpen("the path contains NUL".into()))?;
        let mut errbuf = [0 as c_char; ERRBUF_SIZE];
        // SAFETY: `c` is a NUL-terminated path and `errbuf` has the
        // PCAP_ERRBUF_SIZE bytes pcap_open_offline may write its message to.
        let p = unsafe { (self.open_offline)(c.as_ptr(), errbuf.as_mut_ptr()) };
        if p.is_null() {
            // SAFETY: on failure pcap_open_offline wrote a NUL-terminated
            // message into `errbuf`.
            let msg = unsafe { CStr::from_ptr(errbuf.as_ptr()) };
            return Err(Error::LibpcapOpen(msg.to_string_lossy().into_owned()));
        }
        // SAFETY: `p` is a live handle from pcap_open_offline.
        let link_type = unsafe { (self.datalink)(p) };
        let mut packets = Vec::new();
        let error = loop {
            let mut hdr: *const PktHdr = std::ptr::null();
            let mut data: *const u8 = std::ptr::null();
            // SAFETY: `p` is live; pcap_next_ex sets `hdr` and `data` to
            // its own buffers, valid until the next call on `p`.
            match unsafe { (self.next_ex)(p, &mut hdr, &mut data) } {
                1 => {
                    // SAFETY: on 1, `hdr` points to a filled header and
                    // `data` to `caplen` captured bytes; both are copied
                    // before the next call.
                    let (len, bytes) = unsafe {
                        let h = &*hdr;
                        (
                            h.len,
                            std::slice::from_raw_parts(data, h.caplen as usize).to_vec(),
                        )
                    };
                    packets.push((len, bytes));
                }
                -2 => break None,
                _ => {
                    // SAFETY: pcap_geterr returns the handle's
                    // NUL-terminated error buffer; it is copied at once.
                    let msg = unsafe { CStr::from_ptr((self.geterr)(p)) };
                    break Some(msg.to_string_lossy().into_owned());
                }
            }
        };
        // SAFETY: `p` came from pcap_open_offline and is closed once, after
        // its last use.
        unsafe { (self.close)(p) };
        Ok(Offline {
            link_type,
            packets,
            error,
        })
    }
}

impl Drop for Libpcap {
    fn drop(&mut self) {
        // SAFETY: `handle` came from pcap_open_dead and is closed once;
        // every `Bpf` borrowing `self` is gone by now.
        unsafe { (self.close)(self.handle) }
    }
}

/// A filter compiled by libpcap: its BPF instructions, freed on drop.
pub struct Bpf<'a> {
    pcap: &'a Libpcap,
    prog: BpfProgramRaw,
}

impl fmt::Debug for Bpf<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bpf").field("insns", &self.insns()).finish()
    }
}

impl Bpf<'_> {
    /// The compiled instructions.
    pub fn insns(&self) -> &[BpfInsn] {
        if self.prog.bf_insns.is_null() {
            return &[];
        }
        // SAFETY: pcap_compile filled `bf_insns` with `bf_len`
        // instructions, owned by `self.prog` until pcap_freecode in drop.
        unsafe { std::slice::from_raw_parts(self.prog.bf_insns, self.prog.bf_len as usize) }
    }

    /// Whether `pkt` (captured whole) matches, by `pcap_offline_filter`.
    pub fn matches(&self, pkt: &[u8]) -> bool {
        self.matches_captured(pkt, crate::ir::wire_len(pkt))
    }

    /// Whether `pkt`, the captured bytes of a packet of `wire_len` bytes
    /// on the wire, matches, by `pcap_offline_filter` (the record header's
    /// `caplen` is `pkt`'s length, its `len` is `wire_len`).
    pub fn matches_captured(&self, pkt: &[u8], wire_len: u32) -> bool {
        let hdr = PktHdr {
            ts_sec: 0,
            ts_usec: 0,
            caplen: crate::ir::wire_len(pkt),
            len: wire_len,
        };
        // SAFETY: the program is a valid compiled program; the header says
        // `pkt.len()` bytes are captured and `pkt` has exactly that many,
        // so the interpreter's bounds checks keep its loads inside `pkt`
        // (`len` is only a value to it).
        unsafe { (self.pcap.offline_filter)(&self.prog, &hdr, pkt.as_ptr()) != 0 }
    }

    /// Runs the program in libpcap's BPF interpreter (`bpf_filter`) on
    /// `pkt`, with `wirelen` as the packet's length on the wire; returns
    /// the interpreter's result (0 for no match).
    pub fn run(&self, pkt: &[u8], wirelen: u32) -> u32 {
        let insns = self.insns();
        if insns.is_empty() {
            return 0;
        }
        // SAFETY: the instructions come from pcap_compile, so they pass
        // bpf_validate (scratch indices in range, jumps forward and in
        // bounds); `buflen` is the length of `pkt`, which bounds every
        // packet load.
        unsafe {
            (self.pcap.bpf_filter)(insns.as_ptr(), pkt.as_ptr(), wirelen, pkt.len() as c_uint)
        }
    }

    /// The program as `tcpdump -d` prints it (`bpf_image`), one
    /// instruction a line.
    pub fn image(&self) -> String {
        let mut s = String::new();
        for (i, insn) in self.insns().iter().enumerate() {
            // SAFETY: bpf_image formats one instruction into a static
            // buffer and returns it NUL-terminated; it is copied at once.
            let line = unsafe { CStr::from_ptr((self.pcap.bpf_image)(insn, i as c_int)) };
            s.push_str(&line.to_string_lossy());
            s.push('\n');
        }
        s
    }
}

impl Drop for Bpf<'_> {
    fn drop(&mut self) {
        // SAFETY: `prog` was filled by pcap_compile and is freed once.
        unsafe { (self.pcap.freecode)(&mut self.prog) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiles_and_filters_when_available() {
        let Ok(pcap) = Libpcap::load() else {
            eprintln!("skipped: libpcap is not available");
            return;
        };
        let bpf = pcap.compile("ip proto 6").unwrap();
        assert!(bpf.image().contains("ldh      [12]"));
        let mut pkt = [0u8; 34];
        pkt[12] = 8;
        pkt[23] = 6;
        assert!(bpf.matches(&pkt));
        assert_ne!(bpf.run(&pkt, 34), 0);
        pkt[23] = 17;
        assert!(!bpf.matches(&pkt));
        assert!(matches!(
            pcap.compile("ip proto"),
            Err(Error::LibpcapCompile(_))
        ));
    }
}
