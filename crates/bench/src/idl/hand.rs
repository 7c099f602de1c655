//! The hand-written minimal stub: what a programmer writes for these calls
//! by hand over the same byte channel, the floor a generator can hope to
//! reach. Each call's record is fastpath's layout (docs/idl.md: in, inout,
//! out, return; an array is an (offset, length) descriptor), written with
//! fixed offsets after one length check; arrays follow the record in the
//! message buffer and the server reads them in place.

use super::server::{Pfs, PfsClient, method};
use super::wire::{
    Error, KEY_DIRENTRIES, KEY_NULL, KEY_OPEN, KEY_READ, KEY_WRITE, Service, Wire, status,
};

/// Where an array starts in the message buffer: after the 24-byte records.
const DATA: usize = 24;

#[inline(always)]
fn get(r: &[u8; DATA], at: usize) -> i32 {
    i32::from_ne_bytes([r[at], r[at + 1], r[at + 2], r[at + 3]])
}

#[inline(always)]
fn put(r: &mut [u8; DATA], at: usize, v: i32) {
    r[at..at + 4].copy_from_slice(&v.to_ne_bytes());
}

#[inline(always)]
fn record(msg: &mut [u8]) -> Option<&mut [u8; DATA]> {
    msg.get_mut(..DATA).and_then(|r| r.try_into().ok())
}

/// `bytes` as `i32`s, if aligned.
#[inline(always)]
fn ints(bytes: &[u8]) -> Option<&[i32]> {
    // SAFETY: every bit pattern is a valid i32; `align_to` puts only
    // whole, aligned i32s in the middle part, which borrows `bytes`.
    let (pre, mid, post) = unsafe { bytes.align_to::<i32>() };
    (pre.is_empty() && post.is_empty()).then_some(mid)
}

/// `bytes` as mutable `i32`s, if aligned.
#[inline(always)]
fn ints_mut(bytes: &mut [u8]) -> Option<&mut [i32]> {
    // SAFETY: as in `ints`; the middle part borrows `bytes` mutably and
    // any i32 written is a valid 4-byte pattern.
    let (pre, mid, post) = unsafe { bytes.align_to_mut::<i32>() };
    (pre.is_empty() && post.is_empty()).then_some(mid)
}

/// The array of `n` elements of `size` bytes after the record, if it fits.
#[inline(always)]
fn array(msg: &mut [u8], n: usize, size: usize) -> Option<&mut [u8]> {
    msg.get_mut(DATA..DATA.checked_add(n.checked_mul(size)?)?)
}

/// The client: the stubs over a [`Wire`].
pub struct Client<W> {
    /// The channel.
    pub wire: W,
}

const SHORT: Error = Error::TooLarge(usize::MAX);

impl<W: Wire> PfsClient for Client<W> {
    fn name(&self) -> &'static str {
        "hand-written"
    }

    fn null(&mut self) -> Result<(), Error> {
        self.wire.call(KEY_NULL, 0)?;
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
        let r = record(self.wire.msg()).ok_or(SHORT)?;
        put(r, 0, client);
        put(r, 4, fobj);
        put(r, 8, flags);
        put(r, 12, mode);
        self.wire.call(KEY_OPEN, 16)?;
        let r = record(self.wire.msg()).ok_or(SHORT)?;
        *handle = get(r, 16);
        Ok(get(r, 20))
    }

    fn pfs_write(
        &mut self,
        handle: i32,
        pos: &mut i32,
        len: i32,
        data: &[i32],
    ) -> Result<i32, Error> {
        let msg = self.wire.msg();
        let a = array(msg, data.len(), 4).ok_or(Error::TooLarge(DATA + 4 * data.len()))?;
        for (c, d) in a.chunks_exact_mut(4).zip(data) {
            c.copy_from_slice(&d.to_ne_bytes());
        }
        let r = record(msg).ok_or(SHORT)?;
        put(r, 0, handle);
        put(r, 4, len);
        put(r, 8, DATA as i32);
        put(r, 12, data.len() as i32);
        put(r, 16, *pos);
        self.wire.call(KEY_WRITE, DATA + 4 * data.len())?;
        let r = record(self.wire.msg()).ok_or(SHORT)?;
        *pos = get(r, 16);
        Ok(get(r, 20))
    }

    fn pfs_get_direntries(
        &mut self,
        handle: i32,
        pos: &mut i32,
        count: i32,
        data: &mut Vec<i32>,
    ) -> Result<i32, Error> {
        let r = record(self.wire.msg()).ok_or(SHORT)?;
        put(r, 0, handle);
        put(r, 4, count);
        put(r, 8, *pos);
        let n = self.wire.call(KEY_DIRENTRIES, 12)?;
        let msg = &mut self.wire.msg()[..n];
        let r = record(msg).ok_or(SHORT)?;
        let (len, p, ret) = (get(r, 16) as u32 as usize, get(r, 8), get(r, 20));
        let a = array(msg, len, 4).ok_or(SHORT)?;
        data.clear();
        data.extend_from_slice(ints(a).ok_or(SHORT)?);
        *pos = p;
        Ok(ret)
    }

    fn read(
        &mut self,
        handle: i32,
        offset: i32,
        count: i32,
        data: &mut Vec<u8>,
    ) -> Result<i32, Error> {
        let r = record(self.wire.msg()).ok_or(SHORT)?;
        put(r, 0, handle);
        put(r, 4, offset);
        put(r, 8, count);
        let n = self.wire.call(KEY_READ, 12)?;
        let msg = &mut self.wire.msg()[..n];
        let r = record(msg).ok_or(SHORT)?;
        let (len, ret) = (get(r, 16) as u32 as usize, get(r, 20));
        data.clear();
        data.extend_from_slice(array(msg, len, 1).ok_or(SHORT)?);
        Ok(ret)
    }
}

/// The server: the stubs and the loop's dispatch.
#[derive(Default)]
pub struct Server {
    /// The file server.
    pub pfs: Pfs,
}

const SHORT_MSG: u16 = status::SHORT_MESSAGE;
const BAD_STRING: u16 = status::BAD_STRING;

impl Server {
    fn open(&mut self, msg: &mut [u8], len: usize) -> Result<usize, u16> {
        let r = record(msg).filter(|_| len >= 16).ok_or(SHORT_MSG)?;
        let (c, f, fl, mo) = (get(r, 0), get(r, 4), get(r, 8), get(r, 12));
        let (mut ret, mut h) = (0, 0);
        let pfs = &mut self.pfs;
        method(&mut || ret = pfs.open(c, f, fl, mo, &mut h));
        put(r, 16, h);
        put(r, 20, ret);
        Ok(DATA)
    }

    fn write(&mut self, msg: &mut [u8], len: usize) -> Result<usize, u16> {
        let r = record(msg).filter(|_| len >= DATA).ok_or(SHORT_MSG)?;
        let (h, l, off, n, mut pos) = (get(r, 0), get(r, 4), get(r, 8), get(r, 12), get(r, 16));
        let n = n as u32 as usize;
        if off as usize != DATA || DATA + 4 * n > len {
            return Err(BAD_STRING);
        }
        let data = ints(array(msg, n, 4).ok_or(BAD_STRING)?).ok_or(BAD_STRING)?;
        let mut ret = 0;
        let pfs = &mut self.pfs;
        method(&mut || ret = pfs.write(h, &mut pos, l, data));
        let r = record(msg).ok_or(SHORT_MSG)?;
        put(r, 16, pos);
        put(r, 20, ret);
        Ok(DATA)
    }

    fn dirents(&mut self, msg: &mut [u8], len: usize) -> Result<usize, u16> {
        let r = record(msg).filter(|_| len >= 12).ok_or(SHORT_MSG)?;
        let (h, count, mut pos) = (get(r, 0), get(r, 4), get(r, 8));
        let n = Pfs::direntries_len(count);
        let out = ints_mut(array(msg, n, 4).ok_or(status::OVERFLOW)?).ok_or(BAD_STRING)?;
        let mut ret = 0;
        let pfs = &mut self.pfs;
        method(&mut || ret = pfs.direntries(h, &mut pos, out));
        let r = record(msg).ok_or(SHORT_MSG)?;
        put(r, 8, pos);
        put(r, 12, DATA as i32);
        put(r, 16, n as i32);
        put(r, 20, ret);
        Ok(DATA + 4 * n)
    }

    fn read(&mut self, msg: &mut [u8], len: usize) -> Result<usize, u16> {
        let r = record(msg).filter(|_| len >= 12).ok_or(SHORT_MSG)?;
        let (off, count) = (get(r, 4), get(r, 8));
        let n = self.pfs.read_span(off, count).len();
        let out = array(msg, n, 1).ok_or(status::OVERFLOW)?;
        let pfs = &self.pfs;
        method(&mut || out.copy_from_slice(pfs.read_span(off, count)));
        let r = record(msg).ok_or(SHORT_MSG)?;
        put(r, 12, DATA as i32);
        put(r, 16, n as i32);
        put(r, 20, n as i32);
        Ok(DATA + n)
    }
}

impl Service for Server {
    fn serve(&mut self, key: u16, msg: &mut [u8], len: usize) -> Result<usize, u16> {
        match key {
            KEY_NULL => {
                let pfs = &mut self.pfs;
                method(&mut || pfs.null());
                Ok(0)
            }
            KEY_OPEN => self.open(msg, len),
            KEY_WRITE => self.write(msg, len),
            KEY_DIRENTRIES => self.dirents(msg, len),
            KEY_READ => self.read(msg, len),
            _ => Err(status::BAD_KEY),
        }
    }
}
