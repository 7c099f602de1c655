//! The protobuf peer: stubs of the same shape as fastpath's, written over
//! `prost`'s generated messages (`peers/idl/pfs.proto`).
//!
//! The client stub builds the request message, encodes it straight into
//! the channel's message buffer, calls, and decodes the reply from the
//! buffer; the server stub decodes the request, calls the method, encodes
//! the reply in place. prost's messages own their data, so an in array
//! is copied into the request message (`to_vec`) and decoded into a
//! `Vec` on the server. Used as prost's documentation suggests for speed:
//! out arrays are merged into the caller's `Vec` (its allocation reused),
//! and the server reuses its request and reply messages across calls
//! (`clear` + `merge`), so no call allocates except the client's `to_vec`.

use prost::Message;

use super::schema::pb;
use super::server::{PfsClient, method};
use super::wire::{
    Error, KEY_DIRENTRIES, KEY_NULL, KEY_OPEN, KEY_READ, KEY_WRITE, Service, Wire, status,
};
use crate::idl::server::Pfs;

/// The client: the stubs over a [`Wire`].
pub struct Client<W> {
    /// The channel.
    pub wire: W,
}

/// Encodes `m` at the start of `w`'s message buffer; returns its length.
#[inline]
fn encode<M: Message>(buf: &mut [u8], m: &M) -> Result<usize, usize> {
    let cap = buf.len();
    let mut dst = buf;
    match m.encode(&mut dst) {
        Ok(()) => Ok(cap - dst.len()),
        Err(_) => Err(m.encoded_len()),
    }
}

fn decode_err(e: prost::DecodeError) -> Error {
    Error::Decode(e.to_string())
}

impl<W: Wire> Client<W> {
    #[inline]
    fn send<M: Message>(&mut self, key: u16, m: &M) -> Result<usize, Error> {
        let n = encode(self.wire.msg(), m).map_err(Error::TooLarge)?;
        self.wire.call(key, n)
    }
}

impl<W: Wire> PfsClient for Client<W> {
    fn name(&self) -> &'static str {
        "prost"
    }

    fn null(&mut self) -> Result<(), Error> {
        let n = self.send(KEY_NULL, &pb::NullRequest {})?;
        pb::NullReply::decode(&self.wire.msg()[..n]).map_err(decode_err)?;
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
        let req = pb::OpenRequest {
            client,
            fobj,
            flags,
            mode,
        };
        let n = self.send(KEY_OPEN, &req)?;
        let rep = pb::OpenReply::decode(&self.wire.msg()[..n]).map_err(decode_err)?;
        *handle = rep.handle;
        Ok(rep.ret)
    }

    fn pfs_write(
        &mut self,
        handle: i32,
        pos: &mut i32,
        len: i32,
        data: &[i32],
    ) -> Result<i32, Error> {
        let req = pb::WriteRequest {
            handle,
            pos: *pos,
            len,
            data: data.to_vec(),
        };
        let n = self.send(KEY_WRITE, &req)?;
        let rep = pb::WriteReply::decode(&self.wire.msg()[..n]).map_err(decode_err)?;
        *pos = rep.pos;
        Ok(rep.ret)
    }

    fn pfs_get_direntries(
        &mut self,
        handle: i32,
        pos: &mut i32,
        count: i32,
        data: &mut Vec<i32>,
    ) -> Result<i32, Error> {
        let req = pb::GetDirentriesRequest {
            handle,
            pos: *pos,
            count,
        };
        let n = self.send(KEY_DIRENTRIES, &req)?;
        data.clear();
        let mut rep = pb::GetDirentriesReply {
            ret: 0,
            pos: 0,
            data: std::mem::take(data),
        };
        let r = rep.merge(&self.wire.msg()[..n]).map_err(decode_err);
        *data = rep.data;
        r?;
        *pos = rep.pos;
        Ok(rep.ret)
    }

    fn read(
        &mut self,
        handle: i32,
        offset: i32,
        count: i32,
        data: &mut Vec<u8>,
    ) -> Result<i32, Error> {
        let req = pb::ReadRequest {
            handle,
            offset,
            count,
        };
        let n = self.send(KEY_READ, &req)?;
        data.clear();
        let mut rep = pb::ReadReply {
            ret: 0,
            data: std::mem::take(data),
        };
        let r = rep.merge(&self.wire.msg()[..n]).map_err(decode_err);
        *data = rep.data;
        r?;
        Ok(rep.ret)
    }
}

/// The server: the stubs and the loop's dispatch, with the messages it
/// reuses.
#[derive(Default)]
pub struct Server {
    /// The file server.
    pub pfs: Pfs,
    write: pb::WriteRequest,
    dirents: pb::GetDirentriesReply,
    read: pb::ReadReply,
}

/// The status word of a request that does not decode.
const BAD: u16 = status::BAD_VALUE;

fn reply<M: Message>(msg: &mut [u8], m: &M) -> Result<usize, u16> {
    encode(msg, m).map_err(|_| status::OVERFLOW)
}

impl Server {
    fn null(&mut self, msg: &mut [u8], len: usize) -> Result<usize, u16> {
        pb::NullRequest::decode(&msg[..len]).map_err(|_| BAD)?;
        let pfs = &mut self.pfs;
        method(&mut || pfs.null());
        reply(msg, &pb::NullReply {})
    }

    fn open(&mut self, msg: &mut [u8], len: usize) -> Result<usize, u16> {
        let req = pb::OpenRequest::decode(&msg[..len]).map_err(|_| BAD)?;
        let mut rep = pb::OpenReply::default();
        let pfs = &mut self.pfs;
        method(&mut || {
            rep.ret = pfs.open(req.client, req.fobj, req.flags, req.mode, &mut rep.handle)
        });
        reply(msg, &rep)
    }

    fn write(&mut self, msg: &mut [u8], len: usize) -> Result<usize, u16> {
        self.write.clear();
        self.write.merge(&msg[..len]).map_err(|_| BAD)?;
        let mut rep = pb::WriteReply {
            ret: 0,
            pos: self.write.pos,
        };
        let (pfs, req) = (&mut self.pfs, &self.write);
        method(&mut || rep.ret = pfs.write(req.handle, &mut rep.pos, req.len, &req.data));
        reply(msg, &rep)
    }

    fn dirents(&mut self, msg: &mut [u8], len: usize) -> Result<usize, u16> {
        let req = pb::GetDirentriesRequest::decode(&msg[..len]).map_err(|_| BAD)?;
        let rep = &mut self.dirents;
        rep.pos = req.pos;
        let pfs = &mut self.pfs;
        method(&mut || {
            rep.data.clear();
            rep.data.resize(Pfs::direntries_len(req.count), 0);
            rep.ret = pfs.direntries(req.handle, &mut rep.pos, &mut rep.data);
        });
        reply(msg, &self.dirents)
    }

    fn read(&mut self, msg: &mut [u8], len: usize) -> Result<usize, u16> {
        let req = pb::ReadRequest::decode(&msg[..len]).map_err(|_| BAD)?;
        let rep = &mut self.read;
        let pfs = &mut self.pfs;
        method(&mut || {
            let span = pfs.read_span(req.offset, req.count);
            rep.data.clear();
            rep.data.extend_from_slice(span);
            rep.ret = span.len() as i32;
        });
        reply(msg, &self.read)
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
