//! The Cap'n Proto peer: stubs of the same shape as fastpath's, written
//! over `capnp`'s generated builders and readers (`peers/idl/pfs.capnp`).
//!
//! Used at its best for shared memory: messages are built in place in the
//! channel's message buffer (an [`InPlace`] allocator hands the builder the
//! buffer after an 8-byte segment table, zeroed up to the message's size as
//! Cap'n Proto requires), read in place without copying or allocating
//! (`read_message_from_flat_slice_no_alloc`), and arrays move with
//! `as_slice` (one `memcpy`) rather than element by element. The server
//! reads an in array in place.

use std::ptr::NonNull;

use capnp::message::{Allocator, Builder, ReaderOptions};
use capnp::serialize::read_message_from_flat_slice_no_alloc;

use super::schema::pfs_capnp::{
    get_direntries_reply, get_direntries_request, null_reply, null_request, open_reply,
    open_request, read_reply, read_request, write_reply, write_request,
};
use super::server::{Pfs, PfsClient, method};
use super::wire::{
    Error, KEY_DIRENTRIES, KEY_NULL, KEY_OPEN, KEY_READ, KEY_WRITE, Service, Wire, status,
};

/// An allocator whose first segment is a caller's buffer (the channel's
/// message buffer after the segment table), zeroed up to an estimate of
/// the message's size; later segments, if the estimate was short, come
/// from the heap (and the message is then refused as too large).
pub struct InPlace<'a> {
    seg: &'a mut [u8],
    estimate: usize,
    given: bool,
    spill: Vec<Vec<u64>>,
}

impl<'a> InPlace<'a> {
    /// An allocator over `seg` (8-byte aligned) for a message of about
    /// `estimate` bytes.
    pub fn new(seg: &'a mut [u8], estimate: usize) -> InPlace<'a> {
        InPlace {
            seg,
            estimate,
            given: false,
            spill: Vec::new(),
        }
    }
}

// SAFETY: every segment returned is 8-byte aligned (the channel's buffer
// is, and is asserted in `allocate_segment`; a `Vec<u64>` is), zeroed for
// the whole length returned, and stays valid and unaliased until the
// allocator is dropped: the first is the `&'a mut` slice this allocator
// holds exclusively, the others are heap buffers it owns and never moves
// (pushing onto `spill` moves the `Vec` headers, not their buffers).
unsafe impl Allocator for InPlace<'_> {
    fn allocate_segment(&mut self, minimum_size: u32) -> (NonNull<u8>, u32) {
        let need = minimum_size as usize * 8;
        let aligned = (self.seg.as_ptr() as usize).is_multiple_of(8);
        if !self.given && aligned && need <= self.seg.len() {
            self.given = true;
            let n = self.estimate.max(need).min(self.seg.len()) & !7;
            self.seg[..n].fill(0);
            return (NonNull::from(&mut *self.seg).cast(), (n / 8) as u32);
        }
        let mut v = vec![0u64; (minimum_size as usize).max(1)];
        let words = v.len() as u32;
        let p = NonNull::from(&mut v[..]).cast();
        self.spill.push(v);
        (p, words)
    }

    unsafe fn deallocate_segment(&mut self, _ptr: NonNull<u8>, _words: u32, _used: u32) {}
}

/// Builds a message with `f` in place in `buf` (segment table, then the
/// one segment); returns the bytes used, or the message's size if it does
/// not fit in one segment of `buf`.
#[inline]
fn build<F>(buf: &mut [u8], estimate: usize, f: F) -> Result<usize, usize>
where
    F: FnOnce(&mut Builder<InPlace<'_>>) -> capnp::Result<()>,
{
    if buf.len() < 16 {
        return Err(estimate);
    }
    let (head, body) = buf.split_at_mut(8);
    let mut m = Builder::new(InPlace::new(body, estimate));
    if f(&mut m).is_err() {
        return Err(estimate);
    }
    let segs = m.get_segments_for_output();
    if segs.len() != 1 {
        return Err(segs.iter().map(|s| s.len()).sum());
    }
    let words = (segs[0].len() / 8) as u32;
    drop(m);
    head[..4].copy_from_slice(&0u32.to_le_bytes());
    head[4..].copy_from_slice(&words.to_le_bytes());
    Ok(8 + words as usize * 8)
}

/// Bytes to zero for a message with `words` words of struct and `extra`
/// bytes of list data: the root pointer, the struct, a list's padding.
const fn estimate(words: usize, extra: usize) -> usize {
    8 * (1 + words + 1) + extra
}

fn cerr(e: capnp::Error) -> Error {
    Error::Decode(e.to_string())
}

/// The client: the stubs over a [`Wire`].
pub struct Client<W> {
    /// The channel.
    pub wire: W,
}

impl<W: Wire> Client<W> {
    #[inline]
    fn send<F>(&mut self, key: u16, est: usize, f: F) -> Result<usize, Error>
    where
        F: FnOnce(&mut Builder<InPlace<'_>>) -> capnp::Result<()>,
    {
        let n = build(self.wire.msg(), est, f).map_err(Error::TooLarge)?;
        self.wire.call(key, n)
    }
}

impl<W: Wire> PfsClient for Client<W> {
    fn name(&self) -> &'static str {
        "capnp"
    }

    fn null(&mut self) -> Result<(), Error> {
        let n = self.send(KEY_NULL, estimate(0, 0), |m| {
            m.init_root::<null_request::Builder>();
            Ok(())
        })?;
        let msg = &self.wire.msg()[..n];
        let rd = read_message_from_flat_slice_no_alloc(&mut &msg[..], ReaderOptions::new())
            .map_err(cerr)?;
        rd.get_root::<null_reply::Reader>().map_err(cerr)?;
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
        let n = self.send(KEY_OPEN, estimate(2, 0), |m| {
            let mut r = m.init_root::<open_request::Builder>();
            r.set_client(client);
            r.set_fobj(fobj);
            r.set_flags(flags);
            r.set_mode(mode);
            Ok(())
        })?;
        let msg = &self.wire.msg()[..n];
        let rd = read_message_from_flat_slice_no_alloc(&mut &msg[..], ReaderOptions::new())
            .map_err(cerr)?;
        let rep = rd.get_root::<open_reply::Reader>().map_err(cerr)?;
        *handle = rep.get_handle();
        Ok(rep.get_ret())
    }

    fn pfs_write(
        &mut self,
        handle: i32,
        pos: &mut i32,
        len: i32,
        data: &[i32],
    ) -> Result<i32, Error> {
        let p = *pos;
        let n = self.send(KEY_WRITE, estimate(3, 4 * data.len() + 8), |m| {
            let mut r = m.init_root::<write_request::Builder>();
            r.set_handle(handle);
            r.set_pos(p);
            r.set_len(len);
            let mut l = r.init_data(data.len() as u32);
            match l.as_slice() {
                Some(s) => s.copy_from_slice(data),
                None => {
                    for (i, &d) in data.iter().enumerate() {
                        l.set(i as u32, d);
                    }
                }
            }
            Ok(())
        })?;
        let msg = &self.wire.msg()[..n];
        let rd = read_message_from_flat_slice_no_alloc(&mut &msg[..], ReaderOptions::new())
            .map_err(cerr)?;
        let rep = rd.get_root::<write_reply::Reader>().map_err(cerr)?;
        *pos = rep.get_pos();
        Ok(rep.get_ret())
    }

    fn pfs_get_direntries(
        &mut self,
        handle: i32,
        pos: &mut i32,
        count: i32,
        data: &mut Vec<i32>,
    ) -> Result<i32, Error> {
        let p = *pos;
        let n = self.send(KEY_DIRENTRIES, estimate(2, 0), |m| {
            let mut r = m.init_root::<get_direntries_request::Builder>();
            r.set_handle(handle);
            r.set_pos(p);
            r.set_count(count);
            Ok(())
        })?;
        let msg = &self.wire.msg()[..n];
        let rd = read_message_from_flat_slice_no_alloc(&mut &msg[..], ReaderOptions::new())
            .map_err(cerr)?;
        let rep = rd
            .get_root::<get_direntries_reply::Reader>()
            .map_err(cerr)?;
        let l = rep.get_data().map_err(cerr)?;
        data.clear();
        match l.as_slice() {
            Some(s) => data.extend_from_slice(s),
            None => data.extend(l.iter()),
        }
        *pos = rep.get_pos();
        Ok(rep.get_ret())
    }

    fn read(
        &mut self,
        handle: i32,
        offset: i32,
        count: i32,
        data: &mut Vec<u8>,
    ) -> Result<i32, Error> {
        let n = self.send(KEY_READ, estimate(2, 0), |m| {
            let mut r = m.init_root::<read_request::Builder>();
            r.set_handle(handle);
            r.set_offset(offset);
            r.set_count(count);
            Ok(())
        })?;
        let msg = &self.wire.msg()[..n];
        let rd = read_message_from_flat_slice_no_alloc(&mut &msg[..], ReaderOptions::new())
            .map_err(cerr)?;
        let rep = rd.get_root::<read_reply::Reader>().map_err(cerr)?;
        data.clear();
        data.extend_from_slice(rep.get_data().map_err(cerr)?);
        Ok(rep.get_ret())
    }
}

/// The server: the stubs and the loop's dispatch.
#[derive(Default)]
pub struct Server {
    /// The file server.
    pub pfs: Pfs,
    scratch: Vec<i32>,
}

const BAD: u16 = status::BAD_VALUE;
const OVERFLOW: u16 = status::OVERFLOW;

fn bad<E>(_: E) -> u16 {
    BAD
}

impl Server {
    fn null(&mut self, msg: &mut [u8], len: usize) -> Result<usize, u16> {
        {
            let rd = read_message_from_flat_slice_no_alloc(&mut &msg[..len], ReaderOptions::new())
                .map_err(bad)?;
            rd.get_root::<null_request::Reader>().map_err(bad)?;
        }
        let pfs = &mut self.pfs;
        method(&mut || pfs.null());
        build(msg, estimate(0, 0), |m| {
            m.init_root::<null_reply::Builder>();
            Ok(())
        })
        .map_err(|_| OVERFLOW)
    }

    fn open(&mut self, msg: &mut [u8], len: usize) -> Result<usize, u16> {
        let (c, f, fl, mo) = {
            let rd = read_message_from_flat_slice_no_alloc(&mut &msg[..len], ReaderOptions::new())
                .map_err(bad)?;
            let r = rd.get_root::<open_request::Reader>().map_err(bad)?;
            (r.get_client(), r.get_fobj(), r.get_flags(), r.get_mode())
        };
        let (mut ret, mut handle) = (0, 0);
        let pfs = &mut self.pfs;
        method(&mut || ret = pfs.open(c, f, fl, mo, &mut handle));
        build(msg, estimate(1, 0), |m| {
            let mut r = m.init_root::<open_reply::Builder>();
            r.set_ret(ret);
            r.set_handle(handle);
            Ok(())
        })
        .map_err(|_| OVERFLOW)
    }

    fn write(&mut self, msg: &mut [u8], len: usize) -> Result<usize, u16> {
        let mut ret = 0;
        let mut pos;
        {
            let rd = read_message_from_flat_slice_no_alloc(&mut &msg[..len], ReaderOptions::new())
                .map_err(bad)?;
            let r = rd.get_root::<write_request::Reader>().map_err(bad)?;
            let (h, l) = (r.get_handle(), r.get_len());
            pos = r.get_pos();
            let list = r.get_data().map_err(bad)?;
            let data: &[i32] = match list.as_slice() {
                Some(s) => s,
                None => {
                    self.scratch.clear();
                    self.scratch.extend(list.iter());
                    &self.scratch
                }
            };
            let pfs = &mut self.pfs;
            method(&mut || ret = pfs.write(h, &mut pos, l, data));
        }
        build(msg, estimate(1, 0), |m| {
            let mut r = m.init_root::<write_reply::Builder>();
            r.set_ret(ret);
            r.set_pos(pos);
            Ok(())
        })
        .map_err(|_| OVERFLOW)
    }

    fn dirents(&mut self, msg: &mut [u8], len: usize) -> Result<usize, u16> {
        let (h, mut pos, count) = {
            let rd = read_message_from_flat_slice_no_alloc(&mut &msg[..len], ReaderOptions::new())
                .map_err(bad)?;
            let r = rd
                .get_root::<get_direntries_request::Reader>()
                .map_err(bad)?;
            (r.get_handle(), r.get_pos(), r.get_count())
        };
        let n = Pfs::direntries_len(count);
        let pfs = &mut self.pfs;
        build(msg, estimate(2, 4 * n + 8), |m| {
            let mut r = m.init_root::<get_direntries_reply::Builder>();
            let mut ret = 0;
            {
                let mut l = r.reborrow().init_data(n as u32);
                match l.as_slice() {
                    Some(s) => method(&mut || ret = pfs.direntries(h, &mut pos, s)),
                    None => {
                        let mut tmp = vec![0; n];
                        method(&mut || ret = pfs.direntries(h, &mut pos, &mut tmp));
                        for (i, &d) in tmp.iter().enumerate() {
                            l.set(i as u32, d);
                        }
                    }
                }
            }
            r.set_ret(ret);
            r.set_pos(pos);
            Ok(())
        })
        .map_err(|_| OVERFLOW)
    }

    fn read(&mut self, msg: &mut [u8], len: usize) -> Result<usize, u16> {
        let (off, count) = {
            let rd = read_message_from_flat_slice_no_alloc(&mut &msg[..len], ReaderOptions::new())
                .map_err(bad)?;
            let r = rd.get_root::<read_request::Reader>().map_err(bad)?;
            (r.get_offset(), r.get_count())
        };
        let pfs = &mut self.pfs;
        let n = pfs.read_span(off, count).len();
        build(msg, estimate(1, n + 8), |m| {
            let mut r = m.init_root::<read_reply::Builder>();
            let d = r.reborrow().init_data(n as u32);
            method(&mut || d.copy_from_slice(pfs.read_span(off, count)));
            r.set_ret(n as i32);
            Ok(())
        })
        .map_err(|_| OVERFLOW)
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
