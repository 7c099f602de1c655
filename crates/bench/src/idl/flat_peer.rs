//! The FlatBuffers peer: stubs of the same shape as fastpath's, written
//! over flatc's generated tables (`peers/idl/pfs.fbs`, `flatbuffers` 2.x,
//! the crate that matches Debian's flatc 2.0.8).
//!
//! FlatBuffers builds back to front in its builder's own buffer, so each
//! side keeps one `FlatBufferBuilder` across calls (`reset`, no
//! allocation once warm) and copies the finished bytes into the channel's
//! message buffer; the receiver verifies the buffer (`flatbuffers::root`,
//! as a server facing an untrusted client must) and reads fields in place.
//! An `int` array is written and read element by element (the 2.x crate
//! copies whole slices only for bytes); a `[ubyte]` is one `memcpy` each
//! way (`create_vector_direct`, and a slice view on reading).

use flatbuffers::FlatBufferBuilder;

use super::schema::fb::pfs as fb;
use super::server::{Pfs, PfsClient, method};
use super::wire::{
    Error, KEY_DIRENTRIES, KEY_NULL, KEY_OPEN, KEY_READ, KEY_WRITE, Service, Wire, status,
};

fn ferr(e: flatbuffers::InvalidFlatbuffer) -> Error {
    Error::Decode(e.to_string())
}

/// Copies the builder's finished message into `buf`; returns its length.
#[inline]
fn copy_out(fbb: &FlatBufferBuilder<'_>, buf: &mut [u8]) -> Result<usize, usize> {
    let d = fbb.finished_data();
    match buf.get_mut(..d.len()) {
        Some(dst) => {
            dst.copy_from_slice(d);
            Ok(d.len())
        }
        None => Err(d.len()),
    }
}

/// The client: the stubs over a [`Wire`], with the builder it reuses.
pub struct Client<W> {
    /// The channel.
    pub wire: W,
    fbb: FlatBufferBuilder<'static>,
}

impl<W: Wire> Client<W> {
    /// A client over `wire`.
    pub fn new(wire: W) -> Client<W> {
        Client {
            wire,
            fbb: FlatBufferBuilder::with_capacity(8192),
        }
    }

    #[inline]
    fn send(&mut self, key: u16) -> Result<usize, Error> {
        let n = copy_out(&self.fbb, self.wire.msg()).map_err(Error::TooLarge)?;
        self.wire.call(key, n)
    }
}

impl<W: Wire> PfsClient for Client<W> {
    fn name(&self) -> &'static str {
        "flatbuffers"
    }

    fn null(&mut self) -> Result<(), Error> {
        self.fbb.reset();
        let r = fb::NullRequest::create(&mut self.fbb, &fb::NullRequestArgs {});
        self.fbb.finish(r, None);
        let n = self.send(KEY_NULL)?;
        flatbuffers::root::<fb::NullReply>(&self.wire.msg()[..n]).map_err(ferr)?;
        Ok(())
    }

    fn pfs_open(
        &mut self,
        client: i32,
        fobj: i32,
        flags: i32,
        mode: i32,
        handle: &mut i32,
    ) -> Result<i32, Error> {
        self.fbb.reset();
        let args = fb::OpenRequestArgs {
            client,
            fobj,
            flags,
            mode,
        };
        let r = fb::OpenRequest::create(&mut self.fbb, &args);
        self.fbb.finish(r, None);
        let n = self.send(KEY_OPEN)?;
        let rep = flatbuffers::root::<fb::OpenReply>(&self.wire.msg()[..n]).map_err(ferr)?;
        *handle = rep.handle();
        Ok(rep.ret())
    }

    fn pfs_write(
        &mut self,
        handle: i32,
        pos: &mut i32,
        len: i32,
        data: &[i32],
    ) -> Result<i32, Error> {
        self.fbb.reset();
        let v = self.fbb.create_vector(data);
        let args = fb::WriteRequestArgs {
            handle,
            pos: *pos,
            len,
            data: Some(v),
        };
        let r = fb::WriteRequest::create(&mut self.fbb, &args);
        self.fbb.finish(r, None);
        let n = self.send(KEY_WRITE)?;
        let rep = flatbuffers::root::<fb::WriteReply>(&self.wire.msg()[..n]).map_err(ferr)?;
        *pos = rep.pos();
        Ok(rep.ret())
    }

    fn pfs_get_direntries(
        &mut self,
        handle: i32,
        pos: &mut i32,
        count: i32,
        data: &mut Vec<i32>,
    ) -> Result<i32, Error> {
        self.fbb.reset();
        let args = fb::GetDirentriesRequestArgs {
            handle,
            pos: *pos,
            count,
        };
        let r = fb::GetDirentriesRequest::create(&mut self.fbb, &args);
        self.fbb.finish(r, None);
        let n = self.send(KEY_DIRENTRIES)?;
        let rep =
            flatbuffers::root::<fb::GetDirentriesReply>(&self.wire.msg()[..n]).map_err(ferr)?;
        data.clear();
        if let Some(v) = rep.data() {
            data.extend(v.iter());
        }
        *pos = rep.pos();
        Ok(rep.ret())
    }

    fn read(
        &mut self,
        handle: i32,
        offset: i32,
        count: i32,
        data: &mut Vec<u8>,
    ) -> Result<i32, Error> {
        self.fbb.reset();
        let args = fb::ReadRequestArgs {
            handle,
            offset,
            count,
        };
        let r = fb::ReadRequest::create(&mut self.fbb, &args);
        self.fbb.finish(r, None);
        let n = self.send(KEY_READ)?;
        let rep = flatbuffers::root::<fb::ReadReply>(&self.wire.msg()[..n]).map_err(ferr)?;
        data.clear();
        if let Some(v) = rep.data() {
            data.extend_from_slice(v);
        }
        Ok(rep.ret())
    }
}

/// The server: the stubs and the loop's dispatch, with the builder and
/// the array it reuses.
pub struct Server {
    /// The file server.
    pub pfs: Pfs,
    fbb: FlatBufferBuilder<'static>,
    scratch: Vec<i32>,
}

impl Default for Server {
    fn default() -> Self {
        Server {
            pfs: Pfs::new(),
            fbb: FlatBufferBuilder::with_capacity(8192),
            scratch: Vec::new(),
        }
    }
}

const BAD: u16 = status::BAD_VALUE;
const OVERFLOW: u16 = status::OVERFLOW;

fn bad<E>(_: E) -> u16 {
    BAD
}

impl Server {
    fn reply(&mut self, msg: &mut [u8]) -> Result<usize, u16> {
        copy_out(&self.fbb, msg).map_err(|_| OVERFLOW)
    }

    fn null(&mut self, msg: &mut [u8], len: usize) -> Result<usize, u16> {
        flatbuffers::root::<fb::NullRequest>(&msg[..len]).map_err(bad)?;
        let pfs = &mut self.pfs;
        method(&mut || pfs.null());
        self.fbb.reset();
        let r = fb::NullReply::create(&mut self.fbb, &fb::NullReplyArgs {});
        self.fbb.finish(r, None);
        self.reply(msg)
    }

    fn open(&mut self, msg: &mut [u8], len: usize) -> Result<usize, u16> {
        let req = flatbuffers::root::<fb::OpenRequest>(&msg[..len]).map_err(bad)?;
        let (c, f, fl, mo) = (req.client(), req.fobj(), req.flags(), req.mode());
        let mut args = fb::OpenReplyArgs::default();
        let pfs = &mut self.pfs;
        method(&mut || args.ret = pfs.open(c, f, fl, mo, &mut args.handle));
        self.fbb.reset();
        let r = fb::OpenReply::create(&mut self.fbb, &args);
        self.fbb.finish(r, None);
        self.reply(msg)
    }

    fn write(&mut self, msg: &mut [u8], len: usize) -> Result<usize, u16> {
        let mut args = fb::WriteReplyArgs::default();
        {
            let req = flatbuffers::root::<fb::WriteRequest>(&msg[..len]).map_err(bad)?;
            let (h, l) = (req.handle(), req.len());
            args.pos = req.pos();
            self.scratch.clear();
            if let Some(v) = req.data() {
                self.scratch.extend(v.iter());
            }
            let (pfs, data) = (&mut self.pfs, &self.scratch);
            method(&mut || args.ret = pfs.write(h, &mut args.pos, l, data));
        }
        self.fbb.reset();
        let r = fb::WriteReply::create(&mut self.fbb, &args);
        self.fbb.finish(r, None);
        self.reply(msg)
    }

    fn dirents(&mut self, msg: &mut [u8], len: usize) -> Result<usize, u16> {
        let req = flatbuffers::root::<fb::GetDirentriesRequest>(&msg[..len]).map_err(bad)?;
        let (h, mut pos, count) = (req.handle(), req.pos(), req.count());
        let mut ret = 0;
        let (pfs, out) = (&mut self.pfs, &mut self.scratch);
        method(&mut || {
            out.clear();
            out.resize(Pfs::direntries_len(count), 0);
            ret = pfs.direntries(h, &mut pos, out);
        });
        self.fbb.reset();
        let v = self.fbb.create_vector(&self.scratch);
        let args = fb::GetDirentriesReplyArgs {
            ret,
            pos,
            data: Some(v),
        };
        let r = fb::GetDirentriesReply::create(&mut self.fbb, &args);
        self.fbb.finish(r, None);
        self.reply(msg)
    }

    fn read(&mut self, msg: &mut [u8], len: usize) -> Result<usize, u16> {
        let req = flatbuffers::root::<fb::ReadRequest>(&msg[..len]).map_err(bad)?;
        let (off, count) = (req.offset(), req.count());
        let mut span: &[u8] = &[];
        let pfs = &self.pfs;
        method(&mut || span = pfs.read_span(off, count));
        self.fbb.reset();
        // The 2.x crate's one `memcpy` path, for byte vectors.
        let v = self.fbb.create_vector_direct(span);
        let args = fb::ReadReplyArgs {
            ret: span.len() as i32,
            data: Some(v),
        };
        let r = fb::ReadReply::create(&mut self.fbb, &args);
        self.fbb.finish(r, None);
        self.reply(msg)
    }
}

impl Service for Server {
    fn serve(&mut self, key: u16, msg: &mut [u8], len: usize) -> Result<usize, u16> {
        if len > msg.len() {
            return Err(status::SHORT_MESSAGE);
        }
        match key {
            KEY_NULL => self.null(msg, len),
            KEY_OPEN => self.open(msg, len),
            KEY_WRITE => self.write(msg, len),
            KEY_DIRENTRIES => self.dirents(msg, len),
            KEY_READ => self.read(msg, len),
            _ => Err(status::BAD_KEY),
        }
    }
}
