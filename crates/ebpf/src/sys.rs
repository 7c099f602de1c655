//! The only `unsafe` code of the crate: the `bpf(2)` system call.
//!
//! Each command has its `union bpf_attr` member as a `#[repr(C)]` struct
//! with every padding byte an explicit zeroed field (the kernel refuses an
//! attribute whose unused bytes are not zero), and one safe function that
//! fills it from Rust values, so every pointer the kernel reads or writes
//! comes from a slice of the length the kernel will use. A map's key and
//! value sizes come from [`MapFd`], which only [`map_create`] makes, so
//! the lengths the kernel reads through a key or value pointer are the
//! ones checked here.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use crate::insn::Insn;

const BPF_MAP_CREATE: u32 = 0;
const BPF_MAP_LOOKUP_ELEM: u32 = 1;
const BPF_MAP_UPDATE_ELEM: u32 = 2;
const BPF_MAP_DELETE_ELEM: u32 = 3;
const BPF_PROG_LOAD: u32 = 5;
const BPF_PROG_TEST_RUN: u32 = 10;
const BPF_LINK_CREATE: u32 = 28;
const BPF_LINK_UPDATE: u32 = 29;
const BPF_F_REPLACE: u32 = 1 << 2;

#[repr(C)]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
    map_ifindex: u32,
}

#[repr(C)]
#[derive(Default)]
struct ElemAttr {
    map_fd: u32,
    pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

#[repr(C)]
#[derive(Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    pad: u32,
}

#[repr(C)]
#[derive(Default)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}

#[repr(C)]
#[derive(Default)]
struct LinkUpdateAttr {
    link_fd: u32,
    new_prog_fd: u32,
    flags: u32,
    old_prog_fd: u32,
}

/// Calls `bpf(cmd, attr, sizeof attr)`, returning its non-negative result.
fn bpf<T>(cmd: u32, attr: &mut T) -> io::Result<i32> {
    // SAFETY: `attr` is a live, exclusively borrowed `#[repr(C)]` attribute
    // struct of the layout the kernel expects for `cmd` (checked by each
    // caller), of exactly the size passed; the kernel reads it and may
    // write results back into it, both within those bytes. Any pointers
    // inside it are set by the callers below to live buffers of the
    // lengths they declare.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd as libc::c_long,
            attr as *mut T as *mut libc::c_void,
            std::mem::size_of::<T>() as libc::c_long,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as i32)
    }
}

/// Takes ownership of a file descriptor the kernel just returned.
fn owned(fd: i32) -> OwnedFd {
    // SAFETY: `fd` is a new descriptor returned by a successful bpf(2)
    // call that created an object; nothing else owns or will close it.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

fn name16(name: &str) -> [u8; 16] {
    // The kernel accepts [A-Za-z0-9_.] in names of at most 15 bytes.
    let mut out = [0u8; 16];
    for (o, c) in out[..15].iter_mut().zip(
        name.bytes()
            .filter(|c| c.is_ascii_alphanumeric() || *c == b'_' || *c == b'.'),
    ) {
        *o = c;
    }
    out
}

fn einval() -> io::Error {
    io::Error::from_raw_os_error(libc::EINVAL)
}

/// A map's descriptor with the key and value sizes it was created with.
#[derive(Debug)]
pub struct MapFd {
    fd: OwnedFd,
    key_size: u32,
    value_size: u32,
}

impl MapFd {
    /// The descriptor.
    pub fn fd(&self) -> BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.fd.as_fd()
    }
    /// The key size in bytes.
    pub fn key_size(&self) -> u32 {
        self.key_size
    }
    /// The value size in bytes.
    pub fn value_size(&self) -> u32 {
        self.value_size
    }
}

/// `BPF_MAP_CREATE`.
pub fn map_create(
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    name: &str,
) -> io::Result<MapFd> {
    let mut attr = MapCreateAttr {
        map_type,
        key_size,
        value_size,
        max_entries,
        map_name: name16(name),
        ..Default::default()
    };
    let fd = bpf(BPF_MAP_CREATE, &mut attr)?;
    Ok(MapFd {
        fd: owned(fd),
        key_size,
        value_size,
    })
}

/// `BPF_MAP_UPDATE_ELEM`; `key` and `value` must have the map's sizes.
pub fn map_update(map: &MapFd, key: &[u8], value: &[u8], flags: u64) -> io::Result<()> {
    if key.len() != map.key_size as usize || value.len() != map.value_size as usize {
        return Err(einval());
    }
    let mut attr = ElemAttr {
        map_fd: map.fd.as_raw_fd() as u32,
        key: key.as_ptr() as u64,
        value: value.as_ptr() as u64,
        flags,
        ..Default::default()
    };
    bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(drop)
}

/// `BPF_MAP_LOOKUP_ELEM` into `value`; both must have the map's sizes.
pub fn map_lookup(map: &MapFd, key: &[u8], value: &mut [u8]) -> io::Result<()> {
    if key.len() != map.key_size as usize || value.len() != map.value_size as usize {
        return Err(einval());
    }
    let mut attr = ElemAttr {
        map_fd: map.fd.as_raw_fd() as u32,
        key: key.as_ptr() as u64,
        value: value.as_mut_ptr() as u64,
        ..Default::default()
    };
    bpf(BPF_MAP_LOOKUP_ELEM, &mut attr).map(drop)
}

/// `BPF_MAP_DELETE_ELEM`; `key` must have the map's key size.
pub fn map_delete(map: &MapFd, key: &[u8]) -> io::Result<()> {
    if key.len() != map.key_size as usize {
        return Err(einval());
    }
    let mut attr = ElemAttr {
        map_fd: map.fd.as_raw_fd() as u32,
        key: key.as_ptr() as u64,
        ..Default::default()
    };
    bpf(BPF_MAP_DELETE_ELEM, &mut attr).map(drop)
}

/// `BPF_PROG_LOAD` with `prog_flags` (`BPF_F_*`); with a `log`, the
/// verifier writes its log there (level 1) and the call fails with
/// `ENOSPC` when it does not fit.
pub fn prog_load(
    prog_type: u32,
    expected_attach_type: u32,
    prog_flags: u32,
    insns: &[Insn],
    license: &CStr,
    name: &str,
    log: Option<&mut [u8]>,
) -> io::Result<OwnedFd> {
    let (log_level, log_size, log_buf) = match log {
        Some(buf) => (
            1,
            u32::try_from(buf.len()).unwrap_or(u32::MAX),
            buf.as_mut_ptr() as u64,
        ),
        None => (0, 0, 0),
    };
    let mut attr = ProgLoadAttr {
        prog_type,
        insn_cnt: u32::try_from(insns.len()).map_err(|_| einval())?,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        log_level,
        log_size,
        log_buf,
        prog_flags,
        prog_name: name16(name),
        expected_attach_type,
        ..Default::default()
    };
    bpf(BPF_PROG_LOAD, &mut attr).map(owned)
}

/// What `BPF_PROG_TEST_RUN` reports.
#[derive(Debug, Clone, Copy)]
pub struct TestRunOut {
    /// The program's return value.
    pub retval: u32,
    /// The bytes written to the output buffer.
    pub data_size_out: u32,
    /// The mean time of one run, in nanoseconds.
    pub duration_ns: u32,
}

/// `BPF_PROG_TEST_RUN`: runs the program `repeat` times on `data_in`
/// (with the context `ctx_in`, if given), the packet as the program left
/// it written to `data_out`.
pub fn prog_test_run(
    prog: BorrowedFd<'_>,
    data_in: &[u8],
    data_out: &mut [u8],
    ctx_in: Option<&[u8]>,
    repeat: u32,
) -> io::Result<TestRunOut> {
    let (ctx_size_in, ctx_ptr) = match ctx_in {
        Some(c) => (c.len() as u32, c.as_ptr() as u64),
        None => (0, 0),
    };
    let mut attr = TestRunAttr {
        prog_fd: prog.as_raw_fd() as u32,
        data_size_in: u32::try_from(data_in.len()).map_err(|_| einval())?,
        data_size_out: u32::try_from(data_out.len()).map_err(|_| einval())?,
        data_in: data_in.as_ptr() as u64,
        data_out: data_out.as_mut_ptr() as u64,
        repeat,
        ctx_size_in,
        ctx_in: ctx_ptr,
        ..Default::default()
    };
    bpf(BPF_PROG_TEST_RUN, &mut attr)?;
    Ok(TestRunOut {
        retval: attr.retval,
        data_size_out: attr.data_size_out.min(data_out.len() as u32),
        duration_ns: attr.duration,
    })
}

/// `BPF_LINK_CREATE` of `prog` on the interface `ifindex`.
pub fn link_create(
    prog: BorrowedFd<'_>,
    ifindex: u32,
    attach_type: u32,
    flags: u32,
) -> io::Result<OwnedFd> {
    let mut attr = LinkCreateAttr {
        prog_fd: prog.as_raw_fd() as u32,
        target_ifindex: ifindex,
        attach_type,
        flags,
    };
    bpf(BPF_LINK_CREATE, &mut attr).map(owned)
}

/// `BPF_LINK_UPDATE`: the link runs `new_prog` from now on; with
/// `old_prog`, only if it still runs that one (else `EPERM`).
pub fn link_update(
    link: BorrowedFd<'_>,
    new_prog: BorrowedFd<'_>,
    old_prog: Option<BorrowedFd<'_>>,
) -> io::Result<()> {
    let mut attr = LinkUpdateAttr {
        link_fd: link.as_raw_fd() as u32,
        new_prog_fd: new_prog.as_raw_fd() as u32,
        flags: if old_prog.is_some() { BPF_F_REPLACE } else { 0 },
        old_prog_fd: old_prog.map_or(0, |p| p.as_raw_fd() as u32),
    };
    bpf(BPF_LINK_UPDATE, &mut attr).map(drop)
}

/// `if_nametoindex(3)`.
pub fn if_nametoindex(name: &CStr) -> io::Result<u32> {
    // SAFETY: `name` is a valid NUL-terminated string for the call.
    let i = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if i == 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(i)
    }
}

/// Whether the process runs as root (euid 0).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribute_layouts_match_linux_bpf_h() {
        use std::mem::{offset_of, size_of};
        assert_eq!(offset_of!(MapCreateAttr, map_name), 28);
        assert_eq!(size_of::<MapCreateAttr>(), 48);
        assert_eq!(offset_of!(ElemAttr, key), 8);
        assert_eq!(offset_of!(ElemAttr, flags), 24);
        assert_eq!(offset_of!(ProgLoadAttr, log_buf), 32);
        assert_eq!(offset_of!(ProgLoadAttr, prog_name), 48);
        assert_eq!(offset_of!(ProgLoadAttr, expected_attach_type), 68);
        assert_eq!(offset_of!(TestRunAttr, repeat), 32);
        assert_eq!(offset_of!(TestRunAttr, ctx_in), 48);
        assert_eq!(offset_of!(TestRunAttr, batch_size), 72);
        assert_eq!(size_of::<Insn>(), 8);
    }

    #[test]
    fn names_keep_the_kernels_characters_and_fit() {
        assert_eq!(&name16("dpf-xdp table")[..9], b"dpfxdptab");
        assert_eq!(name16("a_very_long_program_name")[15], 0);
    }
}
