//! `udp`: unet frames over kernel UDP sockets (RFC 768), batched with
//! `sendmmsg(2)` and `recvmmsg(2)`.
//!
//! The kernel owns the Ethernet, IPv4 and UDP headers here, so the
//! transport carries only the rest of a frame: [`send`](Transport::send)
//! strips the first 42 bytes and sends the unet header and payload as one
//! datagram to the frame's IPv4 destination and UDP destination port;
//! [`recv`](Transport::recv) receives datagrams into buffers with 42 bytes
//! of room in front and rebuilds the Ethernet/IPv4/UDP header there from
//! the datagram's source address and the socket's local one, so that the
//! engine classifies the same frame (and a dpf filter means the same) as
//! on `loop`. The rebuilt header is the one [`FrameHeader::template`]
//! writes: MACs derived from the addresses ([`MacAddr::from_ip`]),
//! identification 0, DF, TTL 64, the lengths and the header checksum
//! computed. When the socket is bound to `0.0.0.0`, `IP_PKTINFO` says
//! which local address a datagram was sent to.
//!
//! The UDP checksum travels in the real UDP header, which the kernel checks
//! and strips; when a frame's unet flag bit 0 ("UDP checksum present") is
//! set, the rebuilt header carries the checksum recomputed over what
//! arrived, so that [`verify_udp_checksum`](crate::frame::verify_udp_checksum)
//! holds on every transport. Anything that is not a unet frame (a datagram
//! shorter than the 12-byte unet header) is counted and dropped.
//!
//! The sockets are non-blocking and have 4 MiB buffers (forced past
//! `net.core.rmem_max` when the process may), so that a burst does not
//! overrun them; overruns the kernel reports (`SO_RXQ_OVFL`) are counted.
//! This module owns the `unsafe` of its system calls.

use std::mem::{MaybeUninit, size_of, zeroed};
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::{Transport, TransportError, TransportStats, check_frame_len};
use crate::frame::{
    self, Addr, FLAG_UDP_CHECKSUM, FrameHeader, HEADER_LEN, MacAddr, UNET_FLAGS, WIRE_HEADER_LEN,
    patch_lengths, peek_dst,
};

/// The largest UDP payload over IPv4: 65535 - 20 - 8.
pub const MAX_DATAGRAM: usize = 65507;
/// The largest frame: the largest datagram plus the 42 bytes of Ethernet,
/// IPv4 and UDP header it stands for.
pub const MAX_FRAME: usize = MAX_DATAGRAM + WIRE_HEADER_LEN;
/// Datagrams per `recvmmsg` call.
pub const RECV_BATCH: usize = 32;
/// Datagrams per `sendmmsg` call.
pub const SEND_BATCH: usize = 64;
/// Socket send and receive buffer size asked for.
pub const SOCKET_BUFFER: usize = 4 << 20;

/// Bytes of one receive slot: the rebuilt header's room, then the largest
/// datagram, rounded up.
const SLOT: usize = (WIRE_HEADER_LEN + MAX_DATAGRAM + 1).next_multiple_of(64);
/// Bytes of control-message room per datagram (`IP_PKTINFO`, `SO_RXQ_OVFL`).
const CONTROL: usize = 64;

/// A UDP socket carrying unet frames: the `udp` [`Transport`].
pub struct UdpTransport {
    fd: OwnedFd,
    local: Addr,
    /// Bound to 0.0.0.0: learn each datagram's destination from
    /// `IP_PKTINFO`.
    wildcard: bool,
    /// `RECV_BATCH` slots of `SLOT` bytes.
    rx_buf: Vec<u8>,
    rx_control: Vec<[u64; CONTROL / 8]>,
    rx_names: Vec<libc::sockaddr_in>,
    tx_names: Vec<libc::sockaddr_in>,
    /// The header last rebuilt, for the next datagram from the same peer to
    /// the same local address (then only the lengths change).
    last: Option<(Addr, Addr, [u8; HEADER_LEN])>,
    stats: TransportStats,
}

impl std::fmt::Debug for UdpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdpTransport")
            .field("fd", &self.fd.as_raw_fd())
            .field("local", &self.local)
            .field("stats", &self.stats)
            .finish()
    }
}

fn sockaddr_in(a: Addr) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(a.ip.octets()),
        },
        sin_zero: [0; 8],
    }
}

fn addr_of(s: &libc::sockaddr_in) -> Addr {
    Addr::new(
        Ipv4Addr::from(s.sin_addr.s_addr.to_ne_bytes()),
        u16::from_be(s.sin_port),
    )
}

/// Sets an integer socket option.
fn setsockopt_int(fd: RawFd, level: i32, name: i32, value: i32) -> std::io::Result<()> {
    // SAFETY: the option value is a live `c_int` whose size is passed.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&raw const value).cast(),
            size_of::<i32>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

impl UdpTransport {
    /// Opens a non-blocking UDP socket bound to `addr` (`0.0.0.0` for every
    /// local address, port 0 for a free port: [`local`](Transport::local)
    /// reports the port bound).
    pub fn bind(addr: Addr) -> Result<Self, TransportError> {
        // SAFETY: plain system call; the result is checked.
        let raw = unsafe {
            libc::socket(
                libc::AF_INET,
                libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        };
        if raw < 0 {
            return Err(TransportError::last_os_error("create a UDP socket"));
        }
        // SAFETY: `raw` is a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let size = SOCKET_BUFFER as i32;
        for (force, plain, what) in [
            (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF, "SO_RCVBUF"),
            (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF, "SO_SNDBUF"),
        ] {
            if setsockopt_int(raw, libc::SOL_SOCKET, force, size).is_err() {
                setsockopt_int(raw, libc::SOL_SOCKET, plain, size).map_err(|source| {
                    TransportError::Io {
                        op: format!("set {what} of the UDP socket for {addr}"),
                        source,
                    }
                })?;
            }
        }
        setsockopt_int(raw, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 1).map_err(|source| {
            TransportError::Io {
                op: format!("set SO_RXQ_OVFL of the UDP socket for {addr}"),
                source,
            }
        })?;
        let wildcard = addr.ip.is_unspecified();
        if wildcard {
            setsockopt_int(raw, libc::IPPROTO_IP, libc::IP_PKTINFO, 1).map_err(|source| {
                TransportError::Io {
                    op: format!("set IP_PKTINFO of the UDP socket for {addr}"),
                    source,
                }
            })?;
        }
        let sa = sockaddr_in(addr);
        // SAFETY: `sa` is a valid `sockaddr_in` whose size is passed.
        let r = unsafe {
            libc::bind(
                raw,
                (&raw const sa).cast(),
                size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(TransportError::last_os_error(format!(
                "bind a UDP socket to {addr}"
            )));
        }
        // SAFETY: all-zero is a valid `sockaddr_in`.
        let mut bound: libc::sockaddr_in = unsafe { zeroed() };
        let mut len = size_of::<libc::sockaddr_in>() as libc::socklen_t;
        // SAFETY: `bound` has room for `len` bytes, which the kernel updates.
        let r = unsafe { libc::getsockname(raw, (&raw mut bound).cast(), &mut len) };
        if r != 0 {
            return Err(TransportError::last_os_error(format!(
                "read the address of the UDP socket bound to {addr}"
            )));
        }
        Ok(UdpTransport {
            fd,
            local: addr_of(&bound),
            wildcard,
            rx_buf: vec![0u8; RECV_BATCH * SLOT],
            rx_control: vec![[0u64; CONTROL / 8]; RECV_BATCH],
            // SAFETY: all-zero is a valid `sockaddr_in`.
            rx_names: vec![unsafe { zeroed() }; RECV_BATCH],
            // SAFETY: as above.
            tx_names: vec![unsafe { zeroed() }; SEND_BATCH],
            last: None,
            stats: TransportStats::default(),
        })
    }
}

/// Writes the Ethernet/IPv4/UDP header in front of the datagram of `dlen`
/// bytes at `slot[42..]`, making `slot[..42 + dlen]` a frame; `last` keeps
/// the header of the last (source, destination) pair as a template.
fn rebuild(
    last: &mut Option<(Addr, Addr, [u8; HEADER_LEN])>,
    slot: &mut [u8],
    src: Addr,
    dst: Addr,
    dlen: usize,
) {
    let template = match last {
        Some((s, d, t)) if *s == src && *d == dst => t,
        last => {
            let h = FrameHeader {
                src_mac: MacAddr::from_ip(src.ip).0,
                dst_mac: MacAddr::from_ip(dst.ip).0,
                src,
                dst,
                dst_ep: 0,
                src_ep: 0,
                flags: 0,
            };
            &mut last.insert((src, dst, h.template())).2
        }
    };
    patch_lengths(template, dlen - (HEADER_LEN - WIRE_HEADER_LEN));
    slot[..WIRE_HEADER_LEN].copy_from_slice(&template[..WIRE_HEADER_LEN]);
    let frame = &mut slot[..WIRE_HEADER_LEN + dlen];
    let flags = u16::from_be_bytes([frame[UNET_FLAGS], frame[UNET_FLAGS + 1]]);
    if flags & FLAG_UDP_CHECKSUM != 0 {
        // The frame is at least 54 bytes long: this cannot fail.
        let _ = frame::set_udp_checksum(frame);
    }
}

/// An `mmsghdr` for one datagram: its address, one buffer, and a control
/// area (null for none).
fn mmsghdr(
    name: *mut libc::sockaddr_in,
    iov: *mut libc::iovec,
    control: *mut u8,
    control_len: usize,
) -> libc::mmsghdr {
    // SAFETY: all-zero is a valid `mmsghdr` (integers and null pointers).
    let mut m: libc::mmsghdr = unsafe { zeroed() };
    m.msg_hdr.msg_name = name.cast();
    m.msg_hdr.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
    m.msg_hdr.msg_iov = iov;
    m.msg_hdr.msg_iovlen = 1;
    m.msg_hdr.msg_control = control.cast();
    m.msg_hdr.msg_controllen = control_len;
    m
}

impl Transport for UdpTransport {
    fn send(&mut self, frames: &[&[u8]]) -> Result<usize, TransportError> {
        let mut done = 0;
        while done < frames.len() {
            // The batch: frames from `done` up to the first bad one.
            let mut n = 0;
            let mut bad = None;
            for f in frames[done..].iter().take(SEND_BATCH) {
                if let Err(e) = check_frame_len(f, MAX_FRAME, "udp") {
                    bad = Some(e);
                    break;
                }
                n += 1;
            }
            if n == 0 {
                if done > 0 {
                    return Ok(done);
                }
                self.stats.tx_rejected += 1;
                return Err(bad.unwrap_or(TransportError::FrameTooShort { len: 0 }));
            }
            // Only the first `n` entries are initialized and passed.
            let mut iov = [const { MaybeUninit::<libc::iovec>::uninit() }; SEND_BATCH];
            let mut msgs = [const { MaybeUninit::<libc::mmsghdr>::uninit() }; SEND_BATCH];
            for k in 0..n {
                let f = frames[done + k];
                // At least 54 bytes long: it has a destination.
                let dst = peek_dst(f).unwrap_or(Addr::new(Ipv4Addr::UNSPECIFIED, 0));
                self.tx_names[k] = sockaddr_in(dst);
                let data = &f[WIRE_HEADER_LEN..];
                let v = iov[k].write(libc::iovec {
                    iov_base: data.as_ptr().cast_mut().cast(),
                    iov_len: data.len(),
                });
                msgs[k].write(mmsghdr(
                    &raw mut self.tx_names[k],
                    v,
                    std::ptr::null_mut(),
                    0,
                ));
            }
            let r = loop {
                // SAFETY: `msgs[..n]` are initialized and point to `iov[k]`
                // (each describing a live frame the kernel only reads) and
                // to `tx_names[k]`, all of which outlive the call.
                let r = unsafe {
                    libc::sendmmsg(
                        self.fd.as_raw_fd(),
                        msgs.as_mut_ptr().cast(),
                        n as u32,
                        libc::MSG_DONTWAIT,
                    )
                };
                if r >= 0 || errno() != libc::EINTR {
                    break r;
                }
            };
            if r < 0 {
                let e = errno();
                if e == libc::EAGAIN || e == libc::ENOBUFS {
                    return Ok(done); // no room now: try the rest later
                }
                if done > 0 {
                    return Ok(done); // the next call reports the error
                }
                self.stats.tx_rejected += 1;
                let dst = peek_dst(frames[0]);
                return Err(TransportError::Io {
                    op: format!(
                        "send a datagram from {} to {}",
                        self.local,
                        dst.map_or_else(String::new, |d| d.to_string())
                    ),
                    source: std::io::Error::from_raw_os_error(e),
                });
            }
            let sent = r as usize;
            self.stats.tx_frames += sent as u64;
            self.stats.tx_bytes += frames[done..done + sent]
                .iter()
                .map(|f| f.len() as u64)
                .sum::<u64>();
            done += sent;
            if sent < n || bad.is_some() {
                return Ok(done);
            }
        }
        Ok(done)
    }

    fn recv(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> Result<usize, TransportError> {
        let mut delivered = 0;
        while delivered < max {
            let want = (max - delivered).min(RECV_BATCH);
            // Only the first `want` entries are initialized and passed.
            let mut iov = [const { MaybeUninit::<libc::iovec>::uninit() }; RECV_BATCH];
            let mut msgs = [const { MaybeUninit::<libc::mmsghdr>::uninit() }; RECV_BATCH];
            let base = self.rx_buf.as_mut_ptr();
            for k in 0..want {
                let v = iov[k].write(libc::iovec {
                    // SAFETY: slot k's datagram area, k * SLOT + 42 ..
                    // (k + 1) * SLOT, is inside `rx_buf` (RECV_BATCH slots).
                    iov_base: unsafe { base.add(k * SLOT + WIRE_HEADER_LEN) }.cast(),
                    iov_len: SLOT - WIRE_HEADER_LEN,
                });
                msgs[k].write(mmsghdr(
                    &raw mut self.rx_names[k],
                    v,
                    self.rx_control[k].as_mut_ptr().cast(),
                    CONTROL,
                ));
            }
            let r = loop {
                // SAFETY: `msgs[..want]` are initialized and point to
                // buffers owned by `self` (datagram slots, names, control
                // areas) of the sizes given, which outlive the call; no
                // other reference to them is live.
                let r = unsafe {
                    libc::recvmmsg(
                        self.fd.as_raw_fd(),
                        msgs.as_mut_ptr().cast(),
                        want as u32,
                        libc::MSG_DONTWAIT,
                        std::ptr::null_mut(),
                    )
                };
                if r >= 0 || errno() != libc::EINTR {
                    break r;
                }
            };
            if r < 0 {
                let e = errno();
                if e == libc::EAGAIN {
                    break;
                }
                return Err(TransportError::Io {
                    op: format!("receive datagrams at {}", self.local),
                    source: std::io::Error::from_raw_os_error(e),
                });
            }
            let got = r as usize;
            for (k, m) in msgs[..got].iter().enumerate() {
                // SAFETY: the first `want >= got` entries were initialized
                // above, and the kernel filled in the first `got`.
                let m = unsafe { m.assume_init_ref() };
                let dlen = m.msg_len as usize;
                let (mut dst_ip, overflows) = control(&m.msg_hdr);
                if let Some(o) = overflows {
                    self.stats.rx_overruns = self.stats.rx_overruns.max(u64::from(o));
                }
                if m.msg_hdr.msg_flags & libc::MSG_TRUNC != 0
                    || !(HEADER_LEN - WIRE_HEADER_LEN..=MAX_DATAGRAM).contains(&dlen)
                {
                    self.stats.rx_dropped += 1;
                    continue;
                }
                if !self.wildcard {
                    dst_ip = Some(self.local.ip);
                }
                let src = addr_of(&self.rx_names[k]);
                let dst = Addr::new(dst_ip.unwrap_or(self.local.ip), self.local.port);
                let slot = &mut self.rx_buf[k * SLOT..(k + 1) * SLOT];
                rebuild(&mut self.last, slot, src, dst, dlen);
                let frame_len = WIRE_HEADER_LEN + dlen;
                f(&slot[..frame_len]);
                self.stats.rx_frames += 1;
                self.stats.rx_bytes += frame_len as u64;
                delivered += 1;
            }
            if got < want {
                break;
            }
        }
        Ok(delivered)
    }

    fn local(&self) -> Addr {
        self.local
    }

    fn max_frame(&self) -> usize {
        MAX_FRAME
    }

    fn kind(&self) -> &'static str {
        "udp"
    }

    fn stats(&self) -> TransportStats {
        self.stats
    }

    fn poll_fd(&self) -> Option<RawFd> {
        Some(self.fd.as_raw_fd())
    }
}

impl AsRawFd for UdpTransport {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// The destination address (`IP_PKTINFO`) and the socket's drop count
/// (`SO_RXQ_OVFL`) in a received message's control data.
fn control(h: &libc::msghdr) -> (Option<Ipv4Addr>, Option<u32>) {
    let (mut dst, mut ovfl) = (None, None);
    // SAFETY: `h` was filled by `recvmmsg`: `msg_control` points to our
    // CONTROL-byte area and `msg_controllen` is the length the kernel
    // wrote, so the CMSG_* macros walk only inside it; each payload read is
    // unaligned-safe and checked against the message's length first.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(h);
        while !c.is_null() {
            let data = libc::CMSG_DATA(c);
            let payload = (*c).cmsg_len as usize - (data as usize - c as usize);
            if (*c).cmsg_level == libc::IPPROTO_IP
                && (*c).cmsg_type == libc::IP_PKTINFO
                && payload >= size_of::<libc::in_pktinfo>()
            {
                let info = data.cast::<libc::in_pktinfo>().read_unaligned();
                dst = Some(Ipv4Addr::from(info.ipi_addr.s_addr.to_ne_bytes()));
            } else if (*c).cmsg_level == libc::SOL_SOCKET
                && (*c).cmsg_type == libc::SO_RXQ_OVFL
                && payload >= size_of::<u32>()
            {
                ovfl = Some(data.cast::<u32>().read_unaligned());
            }
            c = libc::CMSG_NXTHDR(h, c);
        }
    }
    (dst, ovfl)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{FLAG_UDP_CHECKSUM, set_udp_checksum, verify_udp_checksum};
    use crate::transport::LoopNet;
    use std::time::{Duration, Instant};

    fn frame(src: Addr, dst: Addr, seq: u32, len: usize, checksum: bool) -> Vec<u8> {
        let mut f = vec![0u8; HEADER_LEN + len];
        let mut h = FrameHeader::new(src, dst, 3, 4);
        if checksum {
            h.flags = FLAG_UDP_CHECKSUM;
        }
        h.write(len, &mut f).unwrap();
        for (i, b) in f[HEADER_LEN..].iter_mut().enumerate() {
            *b = (seq as usize * 7 + i) as u8;
        }
        if len >= 4 {
            f[HEADER_LEN..HEADER_LEN + 4].copy_from_slice(&seq.to_le_bytes());
        }
        if checksum {
            set_udp_checksum(&mut f).unwrap();
        }
        f
    }

    /// Receives until `n` frames arrived or a second passed.
    fn recv_n(t: &mut UdpTransport, n: usize) -> Vec<Vec<u8>> {
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(2);
        while got.len() < n && Instant::now() < deadline {
            if t.recv(n - got.len(), &mut |f| got.push(f.to_vec()))
                .unwrap()
                == 0
            {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        got
    }

    fn pair() -> (UdpTransport, UdpTransport) {
        let a = UdpTransport::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let b = UdpTransport::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        (a, b)
    }

    #[test]
    fn bind_reads_back_the_port_and_refuses_a_taken_one() {
        let (a, _) = pair();
        assert_eq!(a.local().ip, Ipv4Addr::LOCALHOST);
        assert_ne!(a.local().port, 0);
        let e = UdpTransport::bind(a.local()).unwrap_err();
        assert!(
            matches!(&e, TransportError::Io { source, .. } if source.raw_os_error() == Some(libc::EADDRINUSE)),
            "{e}"
        );
        assert!(e.to_string().contains(&a.local().to_string()), "{e}");
        assert_eq!((a.kind(), a.max_frame()), ("udp", 65549));
    }

    /// The frame rebuilt on arrival is byte for byte the frame sent, which
    /// is what `loop` carries.
    #[test]
    fn frames_round_trip_and_the_rebuilt_header_equals_what_loop_carries() {
        let (mut a, mut b) = pair();
        let (la, lb) = (a.local(), b.local());
        let frames: Vec<Vec<u8>> = [0usize, 1, 56, 57, 1024, 4096, crate::frame::MAX_PAYLOAD]
            .iter()
            .enumerate()
            .map(|(i, &len)| frame(la, lb, i as u32, len, i % 2 == 1))
            .collect();
        let refs: Vec<&[u8]> = frames.iter().map(|f| &f[..]).collect();
        let mut sent = 0;
        while sent < refs.len() {
            sent += a.send(&refs[sent..]).unwrap();
        }
        let got = recv_n(&mut b, frames.len());
        assert_eq!(got, frames);
        for f in &got {
            FrameHeader::parse(f).unwrap();
            assert!(verify_udp_checksum(f).is_ok());
        }
        // The same frames over loop arrive as the same bytes.
        let net = LoopNet::new();
        let mut pa = net.attach(la).unwrap();
        let mut pb = net.attach(lb).unwrap();
        pa.send(&refs).unwrap();
        let mut over_loop = Vec::new();
        pb.recv(64, &mut |f| over_loop.push(f.to_vec())).unwrap();
        assert_eq!(over_loop, got);
        // And the reply goes back to the sender's address.
        let reply = frame(lb, la, 99, 10, true);
        b.send(&[&reply]).unwrap();
        assert_eq!(recv_n(&mut a, 1), vec![reply]);
        assert_eq!(a.stats().rx_frames, 1);
        assert_eq!(b.stats().tx_frames, 1);
    }

    #[test]
    fn a_batch_of_64_arrives_in_order() {
        let (mut a, mut b) = pair();
        let frames: Vec<Vec<u8>> = (0..64)
            .map(|i| frame(a.local(), b.local(), i, 100 + i as usize, false))
            .collect();
        let refs: Vec<&[u8]> = frames.iter().map(|f| &f[..]).collect();
        assert_eq!(a.send(&refs).unwrap(), 64);
        let got = recv_n(&mut b, 64);
        assert_eq!(got, frames);
        assert_eq!(b.stats().rx_frames, 64);
        assert_eq!(
            a.stats().tx_bytes,
            frames.iter().map(|f| f.len() as u64).sum::<u64>()
        );
    }

    #[test]
    fn a_wildcard_socket_learns_the_destination_from_ip_pktinfo() {
        let mut w = UdpTransport::bind("0.0.0.0:0".parse().unwrap()).unwrap();
        let port = w.local().port;
        let mut a = UdpTransport::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        // 127.0.0.2 is a local address too, not the one `w` is bound to.
        for ip in [Ipv4Addr::new(127, 0, 0, 1), Ipv4Addr::new(127, 0, 0, 2)] {
            let f = frame(a.local(), Addr::new(ip, port), 1, 8, false);
            a.send(&[&f]).unwrap();
            let got = recv_n(&mut w, 1);
            assert_eq!(got, vec![f], "to {ip}");
        }
    }

    #[test]
    fn oversize_and_short_frames_are_errors_for_that_frame_only() {
        let (mut a, mut b) = pair();
        let good = frame(a.local(), b.local(), 1, 10, false);
        let mut big = frame(a.local(), b.local(), 2, crate::frame::MAX_PAYLOAD, false);
        big.push(0);
        assert_eq!(big.len(), MAX_FRAME + 1);
        assert_eq!(a.send(&[&good, &big, &good]).unwrap(), 1);
        let e = a.send(&[&big, &good]).unwrap_err();
        assert!(
            matches!(e, TransportError::FrameTooLarge { len, max: MAX_FRAME, kind: "udp" } if len == MAX_FRAME + 1)
        );
        assert!(matches!(
            a.send(&[&good[..40]]),
            Err(TransportError::FrameTooShort { len: 40 })
        ));
        assert_eq!(a.send(&[&good]).unwrap(), 1);
        assert_eq!(recv_n(&mut b, 2), vec![good.clone(), good]);
        assert_eq!(a.stats().tx_rejected, 2);
    }

    #[test]
    fn datagrams_that_are_not_unet_frames_are_counted_and_dropped() {
        let (_, mut b) = pair();
        let raw = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        raw.send_to(b"12345678901", std::net::SocketAddrV4::from(b.local()))
            .unwrap();
        raw.send_to(b"123456789012", std::net::SocketAddrV4::from(b.local()))
            .unwrap();
        let got = recv_n(&mut b, 1);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].len(), HEADER_LEN);
        assert_eq!(&got[0][WIRE_HEADER_LEN..], b"123456789012");
        assert_eq!(b.stats().rx_dropped, 1);
        // The datagram's reserved field is not zero: the frame arrives as
        // it came, and the engine's parse rejects it.
        assert!(FrameHeader::parse(&got[0]).is_err());
    }
}
