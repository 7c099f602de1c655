//! The application's side of an engine in another process (`fastpath
//! engine`, [`crate::daemon`]): connect to its Unix socket, receive each
//! endpoint's `memfd` by `SCM_RIGHTS` (unix(7)), map it, and use it as any
//! [`Endpoint`] (U-Net §2: the endpoint is mapped into the application,
//! which then talks to the network interface through its queues alone).
//!
//! The engine's own threads serve the queues, so an endpoint of a remote
//! engine never drives the engine from its calls; its control operations
//! (channels, filters, applets, counters, close) travel over the
//! connection, which the [`Client`] and all its endpoints share. The
//! engine's own counters ([`Client::engine_counts`]) come the same way,
//! within the daemon's budget of reads for this process. The
//! application trusts the engine as far as the segment goes: a mapped
//! `memfd` must be sealed against resizing ([`Segment::map`]) and its
//! header must describe a valid layout that fits it
//! ([`Layout::from_header`]) for the endpoint the engine named.

use std::ffi::c_int;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::daemon::proto::{
    COUNTERS, ENGINE_COUNTERS, MAX_FRAME, PROTOCOL_VERSION, Refusal, Request, STATUS_OK,
    STATUS_REFUSED, counts_from_bytes, engine_counts_from_bytes,
};
use crate::endpoint::{Control, Endpoint};
use crate::engine::{ChannelOptions, EngineCounts, EngineError, PortCounts};
use crate::frame::{Addr, EndpointId};
use crate::layout::{Config, Layout};
use crate::shm::Segment;

/// A connection to an engine in another process.
///
/// ```
/// use unet::{Config, transport::LoopNet};
/// # let net = LoopNet::new();
/// # let engine = unet::Engine::new(Box::new(net.attach("10.0.0.1:7000".parse()?)?));
/// # engine.start(1);
/// # let path = std::env::temp_dir().join(format!("unet-doc-client-{}.sock", std::process::id()));
/// # let server = unet::daemon::serve(engine.clone(), &path)?;
/// // With `fastpath engine` (or `unet::daemon::serve`) listening at `path`:
/// let client = unet::client::Client::connect(&path)?;
/// let mut a = client.create_endpoint(Config::default(), None)?;
/// let mut b = client.create_endpoint(Config::default(), None)?;
/// let ab = a.open_channel(client.local(), b.id())?;
/// let _ba = b.open_channel(client.local(), a.id())?;
/// a.send(ab, b"through the daemon's engine")?;
/// let msg = loop {
///     if let Some(m) = b.recv() {
///         break m.to_vec();
///     }
///     std::thread::yield_now();
/// };
/// assert_eq!(msg, b"through the daemon's engine");
/// # drop((a, b, client));
/// # server.shutdown();
/// # engine.stop();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct Client {
    conn: Arc<Mutex<UnixStream>>,
    local: Addr,
    path: PathBuf,
}

fn lock(m: &Mutex<UnixStream>) -> MutexGuard<'_, UnixStream> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn remote(what: impl std::fmt::Display) -> EngineError {
    EngineError::Remote(what.to_string())
}

impl Client {
    /// Connects to the engine serving the socket at `path` and asks for its
    /// protocol version and address.
    pub fn connect(path: impl AsRef<Path>) -> Result<Client, EngineError> {
        let path = path.as_ref();
        let stream = UnixStream::connect(path)
            .map_err(|e| remote(format_args!("connecting to {}: {e}", path.display())))?;
        let conn = Arc::new(Mutex::new(stream));
        let (info, _) = call(&conn, &Request::Info)?;
        let (version, ip, port) = match info[..] {
            [v0, v1, a, b, c, d, p0, p1] => (
                u16::from_le_bytes([v0, v1]),
                std::net::Ipv4Addr::new(a, b, c, d),
                u16::from_le_bytes([p0, p1]),
            ),
            _ => {
                return Err(remote(format_args!(
                    "malformed Info reply of {} bytes",
                    info.len()
                )));
            }
        };
        if version != PROTOCOL_VERSION {
            return Err(remote(format_args!(
                "{} speaks protocol version {version}, this client {PROTOCOL_VERSION}",
                path.display()
            )));
        }
        Ok(Client {
            conn,
            local: Addr::new(ip, port),
            path: path.to_path_buf(),
        })
    }

    /// The engine's address on the unet network (to open channels to its
    /// other endpoints).
    pub fn local(&self) -> Addr {
        self.local
    }

    /// The socket it is connected to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Creates an endpoint with `config` and an optional applet on the
    /// engine, and maps it into this process. The endpoint is removed when
    /// dropped, or when this process's connection closes.
    pub fn create_endpoint(
        &self,
        config: Config,
        applet: Option<&[u8]>,
    ) -> Result<Endpoint, EngineError> {
        let (reply, fd) = call(&self.conn, &Request::Create { config, applet })?;
        let id = reply_u32("CreateEndpoint", &reply)?;
        let link = Remote {
            conn: self.conn.clone(),
        };
        // From here on `link` closes endpoint `id` if anything fails.
        let mut guard = CloseOnError {
            link: Some(link),
            id,
        };
        let fd = fd.ok_or_else(|| remote(format_args!("endpoint {id} came without its memfd")))?;
        let seg = Segment::map(fd)?;
        let (hid, layout) = Layout::from_header(&seg.read_header(), seg.len())?;
        if hid != id || layout.config != config {
            return Err(remote(format_args!(
                "the segment of endpoint {id} describes endpoint {hid} with {:?}",
                layout.config
            )));
        }
        let link = Remote {
            conn: self.conn.clone(),
        };
        let ep = Endpoint::from_parts(id, Arc::new(seg), layout, Box::new(link))?;
        // The endpoint closes it from here on.
        guard.link = None;
        Ok(ep)
    }
}

/// The counters a client may read of a daemon's engine
/// ([`Client::engine_counts`]): the engine's own totals, and the counters of
/// the endpoints of the client's it named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteCounts {
    /// The engine's own counters, summed over all its endpoints and clients.
    pub engine: EngineCounts,
    /// Each endpoint named, with its counters, in the order named.
    pub endpoints: Vec<(EndpointId, PortCounts)>,
}

impl Client {
    /// The engine's own counters and those of `endpoints` (ids of
    /// endpoints created through this client; empty for the totals
    /// alone), read at one moment by the daemon. An id this connection
    /// does not own is refused ([`EngineError::Refused`] with
    /// [`Refusal::NotYours`]) and nothing is read; past the daemon's
    /// budget of reads for this process
    /// ([`crate::daemon::ServeOptions::max_engine_counts_per_second`]) the
    /// read is refused with [`Refusal::CountsBudget`], which says when to
    /// try again.
    pub fn engine_counts(&self, endpoints: &[EndpointId]) -> Result<RemoteCounts, EngineError> {
        if endpoints.len() > crate::daemon::proto::MAX_COUNTS_ENDPOINTS {
            return Err(remote(format_args!(
                "{} endpoints named; one request names at most {}",
                endpoints.len(),
                crate::daemon::proto::MAX_COUNTS_ENDPOINTS
            )));
        }
        let (b, _) = call(
            &self.conn,
            &Request::EngineCounts {
                ids: endpoints.to_vec(),
            },
        )?;
        let head = 8 * ENGINE_COUNTERS;
        let each = 8 * COUNTERS;
        if b.len() != head + each * endpoints.len() {
            return Err(remote(format_args!(
                "malformed EngineCounts reply of {} bytes for {} endpoints",
                b.len(),
                endpoints.len()
            )));
        }
        let engine = engine_counts_from_bytes(&b[..head]).expect("length checked");
        let endpoints = endpoints
            .iter()
            .zip(b[head..].chunks_exact(each))
            .map(|(&id, c)| (id, counts_from_bytes(c).expect("length checked")))
            .collect();
        Ok(RemoteCounts { engine, endpoints })
    }
}

/// Closes an endpoint the engine made but this process could not use.
struct CloseOnError {
    link: Option<Remote>,
    id: EndpointId,
}

impl Drop for CloseOnError {
    fn drop(&mut self) {
        if let Some(mut l) = self.link.take() {
            l.close(self.id);
        }
    }
}

/// Reads one reply frame: its status and body, and the descriptors that
/// came with it into `fds`.
fn read_reply(s: &UnixStream, fds: &mut Vec<OwnedFd>) -> io::Result<(u8, Vec<u8>)> {
    let mut len = [0u8; 4];
    recv_exact(s, &mut len, fds)?;
    let len = u32::from_le_bytes(len) as usize;
    if len == 0 || len > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("reply frame of {len} bytes"),
        ));
    }
    let mut body = vec![0u8; len];
    recv_exact(s, &mut body, fds)?;
    let status = body.remove(0);
    Ok((status, body))
}

/// Sends one request and reads its reply: the payload of a success and
/// the descriptor that came with it, or the engine's message as
/// [`EngineError::Remote`]. A broken connection is shut down, so that every
/// later request fails at once rather than reading a stale reply.
fn call(
    conn: &Mutex<UnixStream>,
    req: &Request<'_>,
) -> Result<(Vec<u8>, Option<OwnedFd>), EngineError> {
    let s = lock(conn);
    let exchange = || -> io::Result<(u8, Vec<u8>, Vec<OwnedFd>)> {
        let mut fds = Vec::new();
        if let Err(e) = (&*s).write_all(&req.encode()) {
            // A daemon that closed the connection may have said why first
            // (an idle connection closed to make room for a new client):
            // its last words, an error reply, are the answer; else the
            // write's error.
            if !matches!(
                e.kind(),
                io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
            ) {
                return Err(e);
            }
            return match read_reply(&s, &mut fds) {
                Ok((status, body)) if status != STATUS_OK => Ok((status, body, fds)),
                _ => Err(e),
            };
        }
        let (status, body) = read_reply(&s, &mut fds)?;
        Ok((status, body, fds))
    };
    match exchange() {
        Ok((STATUS_OK, body, mut fds)) => {
            // At most one descriptor is expected; any others close here.
            let fd = if fds.is_empty() {
                None
            } else {
                Some(fds.swap_remove(0))
            };
            Ok((body, fd))
        }
        Ok((STATUS_REFUSED, body, _)) => Err(match Refusal::decode(&body) {
            Some(r) => EngineError::Refused(r),
            None => remote(format_args!("malformed refusal of {} bytes", body.len())),
        }),
        Ok((_, body, _)) => Err(EngineError::Remote(
            String::from_utf8_lossy(&body).into_owned(),
        )),
        Err(e) => {
            let _ = s.shutdown(std::net::Shutdown::Both);
            Err(remote(format_args!("connection to the engine: {e}")))
        }
    }
}

/// Fills `buf` from `s` with `recvmsg`, keeping every descriptor that
/// arrives on the way (`SCM_RIGHTS`, close-on-exec).
fn recv_exact(s: &UnixStream, buf: &mut [u8], fds: &mut Vec<OwnedFd>) -> io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        match recv_some(s, &mut buf[got..], fds)? {
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            n => got += n,
        }
    }
    Ok(())
}

/// One `recvmsg` into `buf`; the bytes read.
fn recv_some(s: &UnixStream, buf: &mut [u8], fds: &mut Vec<OwnedFd>) -> io::Result<usize> {
    // Room for a few descriptors, aligned for `cmsghdr`.
    let mut control = [0u64; 8];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: `msghdr` is a C struct for which all zeros is a valid value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &raw mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = size_of_val(&control) as _;
    let n = loop {
        // SAFETY: `msg` describes `buf` and `control`, both writable and
        // alive for the call; the kernel writes at most their lengths.
        let n = unsafe { libc::recvmsg(s.as_raw_fd(), &raw mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n >= 0 {
            break n as usize;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    // SAFETY: after a successful recvmsg, `msg_control`/`msg_controllen`
    // describe the control messages the kernel wrote into `control`;
    // CMSG_FIRSTHDR/CMSG_NXTHDR walk them and return null at the end.
    let mut c = unsafe { libc::CMSG_FIRSTHDR(&raw const msg) };
    while !c.is_null() {
        // SAFETY: `c` points at a complete `cmsghdr` inside `control`.
        let h = unsafe { c.read_unaligned() };
        if h.cmsg_level == libc::SOL_SOCKET && h.cmsg_type == libc::SCM_RIGHTS {
            // SAFETY: CMSG_LEN only computes a size.
            let header = unsafe { libc::CMSG_LEN(0) } as usize;
            let count = (h.cmsg_len as usize).saturating_sub(header) / size_of::<c_int>();
            for i in 0..count {
                // SAFETY: the kernel wrote `count` descriptors after the
                // header, inside `control` (it truncates rather than
                // overflow, reported by MSG_CTRUNC below); each is a new
                // descriptor this process now owns.
                let fd = unsafe { libc::CMSG_DATA(c).cast::<c_int>().add(i).read_unaligned() };
                if fd >= 0 {
                    // SAFETY: as above: a fresh descriptor, owned by no one else.
                    fds.push(unsafe { OwnedFd::from_raw_fd(fd) });
                }
            }
        }
        // SAFETY: as for CMSG_FIRSTHDR.
        c = unsafe { libc::CMSG_NXTHDR(&raw const msg, c) };
    }
    if msg.msg_flags & libc::MSG_CTRUNC != 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the engine sent more descriptors than expected",
        ));
    }
    Ok(n)
}

/// The control operations of an endpoint of a remote engine, over the
/// client's connection.
struct Remote {
    conn: Arc<Mutex<UnixStream>>,
}

impl Remote {
    fn call(&self, req: &Request<'_>) -> Result<Vec<u8>, EngineError> {
        call(&self.conn, req).map(|(body, _)| body)
    }
}

fn reply_u16(op: &str, b: &[u8]) -> Result<u16, EngineError> {
    match *b {
        [x, y] => Ok(u16::from_le_bytes([x, y])),
        _ => Err(remote(format_args!(
            "malformed {op} reply of {} bytes",
            b.len()
        ))),
    }
}

fn reply_u32(op: &str, b: &[u8]) -> Result<u32, EngineError> {
    match *b {
        [a, b2, c, d] => Ok(u32::from_le_bytes([a, b2, c, d])),
        _ => Err(remote(format_args!(
            "malformed {op} reply of {} bytes",
            b.len()
        ))),
    }
}

impl Control for Remote {
    fn open_channel(
        &mut self,
        id: EndpointId,
        remote: Addr,
        remote_ep: EndpointId,
        opts: ChannelOptions,
    ) -> Result<u16, EngineError> {
        let b = self.call(&Request::OpenChannel {
            id,
            remote,
            remote_ep,
            checksum: opts.checksum,
        })?;
        reply_u16("OpenChannel", &b)
    }

    fn install_filter(
        &mut self,
        id: EndpointId,
        chan: u16,
        filter: &str,
        priority: i32,
    ) -> Result<dpf::FilterId, EngineError> {
        let b = self.call(&Request::InstallFilter {
            id,
            chan,
            priority,
            text: filter,
        })?;
        let v: [u8; 8] = b[..].try_into().map_err(|_| {
            remote(format_args!(
                "malformed InstallFilter reply of {} bytes",
                b.len()
            ))
        })?;
        Ok(dpf::FilterId(u64::from_le_bytes(v)))
    }

    fn remove_filter(&mut self, id: EndpointId, filter: dpf::FilterId) -> Result<(), EngineError> {
        self.call(&Request::RemoveFilter {
            id,
            filter: filter.0,
        })
        .map(drop)
    }

    fn set_applet(&mut self, id: EndpointId, applet: Option<&[u8]>) -> Result<(), EngineError> {
        self.call(&Request::SetApplet { id, applet }).map(drop)
    }

    fn counts(&mut self, id: EndpointId) -> Result<PortCounts, EngineError> {
        let b = self.call(&Request::Counts { id })?;
        counts_from_bytes(&b)
            .ok_or_else(|| remote(format_args!("malformed Counts reply of {} bytes", b.len())))
    }

    fn closed_channels(&mut self, id: EndpointId) -> Result<Vec<u16>, EngineError> {
        let b = self.call(&Request::ClosedChannels { id })?;
        if b.len() % 2 != 0 {
            return Err(remote(format_args!(
                "malformed ClosedChannels reply of {} bytes",
                b.len()
            )));
        }
        Ok(b.chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect())
    }

    fn close(&mut self, id: EndpointId) {
        let _ = self.call(&Request::Close { id });
    }
}
