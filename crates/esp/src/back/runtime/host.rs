//! The host side of the runtime: the external channels' bindings, queues
//! and ports, the host functions, the trace, and the three trampolines
//! (`rt_call`, `rt_recv`, `rt_send`) that generated code calls through
//! [`Ctx`](crate::abi::Ctx).

use std::ffi::c_void;
use std::panic::{AssertUnwindSafe, catch_unwind};

use super::Event;
use crate::abi::{InPort, OutPort};
use crate::error::Error;
use crate::ir::{ChanId, ChanKind, ExternId};

pub(super) type ExternFn = Box<dyn FnMut(&[i64]) -> std::result::Result<i64, String>>;
pub(super) type InFn = Box<dyn FnMut() -> Option<Vec<i64>>>;
pub(super) type OutFn = Box<dyn FnMut(&[i64])>;

/// One channel's host side (only external channels use it).
pub(super) struct Endpoint {
    pub(super) name: String,
    pub(super) kind: ChanKind,
    pub(super) arity: usize,
    /// Queued input: fields from `head` on are unread.
    pub(super) input: Vec<i64>,
    pub(super) head: usize,
    /// Queued input messages of a channel of arity 0.
    pub(super) empties: usize,
    /// Queued output: the first `out_len` fields; the rest is zeroed room
    /// that generated code writes through the out port.
    pub(super) output: Vec<i64>,
    pub(super) out_len: usize,
    pub(super) recv_cb: Option<InFn>,
    pub(super) send_cb: Option<OutFn>,
}

/// What generated code and the trampolines reach through `ctx.host`.
/// `failed` is first: compiled processes read it after every host call.
#[repr(C)]
pub(super) struct Host {
    pub(super) failed: i64,
    pub(super) error: Option<Error>,
    pub(super) externs: Vec<Option<ExternFn>>,
    pub(super) extern_names: Vec<String>,
    pub(super) extern_arity: Vec<usize>,
    pub(super) chans: Vec<Endpoint>,
    pub(super) ins: Vec<InPort>,
    pub(super) outs: Vec<OutPort>,
    /// True while generated graph code runs with the ports open.
    pub(super) ports_open: bool,
    pub(super) tracing: bool,
    pub(super) trace: Vec<Event>,
}

pub(super) fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        format!("panicked: {s}")
    } else if let Some(s) = p.downcast_ref::<String>() {
        format!("panicked: {s}")
    } else {
        "panicked".to_string()
    }
}

impl Host {
    pub(super) fn fail(&mut self, e: Error) {
        if self.error.is_none() {
            self.error = Some(e);
        }
        self.failed = 1;
    }

    /// The pending error, if a host function or callback failed.
    #[inline]
    pub(super) fn take_error(&mut self) -> Option<Error> {
        if self.failed == 0 {
            return None;
        }
        self.take_error_slow()
    }

    #[cold]
    pub(super) fn take_error_slow(&mut self) -> Option<Error> {
        self.failed = 0;
        Some(self.error.take().unwrap_or_else(|| Error::Host {
            name: "?".into(),
            msg: "failed".into(),
        }))
    }

    pub(super) fn call(&mut self, f: ExternId, args: &[i64]) -> Option<i64> {
        let name = || self_name(&self.extern_names, f);
        let Some(Some(func)) = self.externs.get_mut(f as usize) else {
            let e = Error::Binding(format!("host function {} is not bound", name()));
            self.fail(e);
            return None;
        };
        match catch_unwind(AssertUnwindSafe(|| func(args))) {
            Ok(Ok(v)) => Some(v),
            Ok(Err(msg)) => {
                let e = Error::Host { name: name(), msg };
                self.fail(e);
                None
            }
            Err(p) => {
                let e = Error::Host {
                    name: name(),
                    msg: panic_message(p),
                };
                self.fail(e);
                None
            }
        }
    }

    /// Reads one message of external-in channel `c` into `dst`.
    pub(super) fn recv(&mut self, c: ChanId, dst: &mut [i64]) -> bool {
        if self.ports_open {
            self.sync_in(c);
        }
        let Some(ch) = self.chans.get_mut(c as usize) else {
            return false;
        };
        let got = if let Some(cb) = ch.recv_cb.as_mut() {
            match catch_unwind(AssertUnwindSafe(cb)) {
                Ok(Some(m)) if m.len() == ch.arity && dst.len() == ch.arity => {
                    dst.copy_from_slice(&m);
                    true
                }
                Ok(Some(m)) => {
                    let e = Error::Host {
                        name: ch.name.clone(),
                        msg: format!(
                            "the callback returned {} fields for a channel of arity {}",
                            m.len(),
                            ch.arity
                        ),
                    };
                    self.fail(e);
                    return false;
                }
                Ok(None) => false,
                Err(p) => {
                    let e = Error::Host {
                        name: ch.name.clone(),
                        msg: panic_message(p),
                    };
                    self.fail(e);
                    return false;
                }
            }
        } else if ch.arity == 0 {
            if ch.empties > 0 {
                ch.empties -= 1;
                true
            } else {
                false
            }
        } else if ch.head + ch.arity <= ch.input.len() && dst.len() == ch.arity {
            dst.copy_from_slice(&ch.input[ch.head..ch.head + ch.arity]);
            ch.head += ch.arity;
            if ch.head == ch.input.len() {
                ch.input.clear();
                ch.head = 0;
            }
            true
        } else {
            false
        };
        if got && self.tracing {
            self.trace.push(Event::In {
                chan: c,
                fields: dst.to_vec(),
            });
        }
        if self.ports_open {
            self.reopen_in(c);
        }
        got
    }

    /// Writes one message on external-out channel `c`.
    pub(super) fn send(&mut self, c: ChanId, src: &[i64]) {
        if self.ports_open {
            self.sync_out(c);
        }
        let Some(ch) = self.chans.get_mut(c as usize) else {
            return;
        };
        if self.tracing {
            self.trace.push(Event::Out {
                chan: c,
                fields: src.to_vec(),
            });
        }
        if let Some(cb) = ch.send_cb.as_mut() {
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| cb(src))) {
                let e = Error::Host {
                    name: ch.name.clone(),
                    msg: panic_message(p),
                };
                self.fail(e);
            }
        } else {
            let end = ch.out_len + src.len();
            if end > ch.output.len() {
                let room = end.max(2 * ch.output.len()).max(64);
                ch.output.resize(room, 0);
            }
            ch.output[ch.out_len..end].copy_from_slice(src);
            ch.out_len = end;
        }
        if self.ports_open {
            self.reopen_out(c);
        }
    }

    /// Opens the ports of every queued external channel for generated
    /// code (closed ones make it call the trampolines for every message).
    pub(super) fn open_ports(&mut self) {
        self.ports_open = true;
        for c in 0..self.chans.len() as ChanId {
            self.reopen_in(c);
            self.reopen_out(c);
        }
    }

    /// Takes back what generated code consumed and produced.
    pub(super) fn close_ports(&mut self) {
        for c in 0..self.chans.len() as ChanId {
            self.sync_in(c);
            self.sync_out(c);
        }
        self.ports_open = false;
        for p in &mut self.ins {
            *p = empty_in();
        }
        for p in &mut self.outs {
            *p = empty_out();
        }
    }

    pub(super) fn inline(&self, ch: &Endpoint) -> bool {
        self.ports_open && !self.tracing && ch.arity > 0
    }

    pub(super) fn reopen_in(&mut self, c: ChanId) {
        let (Some(ch), Some(port)) = (self.chans.get_mut(c as usize), self.ins.get_mut(c as usize))
        else {
            return;
        };
        let inline = self.ports_open && !self.tracing && ch.arity > 0;
        if ch.kind != ChanKind::ExternalIn || !inline || ch.recv_cb.is_some() {
            *port = empty_in();
            return;
        }
        let base = ch.input.as_ptr();
        // SAFETY: `head <= len` is kept by every reader, so both pointers are
        // inside (or one past) the queue's buffer, which does not move while
        // the ports are open (nothing pushes input while generated code runs).
        *port = unsafe {
            InPort {
                next: base.add(ch.head),
                end: base.add(ch.input.len()),
            }
        };
    }

    pub(super) fn sync_in(&mut self, c: ChanId) {
        let (Some(ch), Some(port)) = (self.chans.get_mut(c as usize), self.ins.get_mut(c as usize))
        else {
            return;
        };
        if port.next.is_null() {
            return;
        }
        let base = ch.input.as_ptr();
        // SAFETY: the port was made by `reopen_in` from this buffer, and
        // generated code only moves `next` forward by whole messages up to
        // `end`, so both are in the same allocation.
        let at = unsafe { port.next.offset_from(base) };
        if at >= 0 && (at as usize) <= ch.input.len() {
            ch.head = at as usize;
        }
        if ch.head == ch.input.len() {
            ch.input.clear();
            ch.head = 0;
        }
        *port = empty_in();
    }

    pub(super) fn reopen_out(&mut self, c: ChanId) {
        let inline = match self.chans.get(c as usize) {
            Some(ch) => self.inline(ch),
            None => return,
        };
        let (Some(ch), Some(port)) = (
            self.chans.get_mut(c as usize),
            self.outs.get_mut(c as usize),
        ) else {
            return;
        };
        if ch.kind != ChanKind::ExternalOut || !inline || ch.send_cb.is_some() {
            *port = empty_out();
            return;
        }
        let want = ch.out_len + 256 * ch.arity;
        if ch.output.len() < want {
            let room = want.max(2 * ch.output.len());
            ch.output.resize(room, 0);
        }
        let room = (ch.output.len() - ch.out_len) / ch.arity * ch.arity;
        let base = ch.output.as_mut_ptr();
        // SAFETY: `out_len + room <= output.len()`: both pointers are inside
        // (or one past) the buffer, which does not move while the port is
        // open (only `send` grows it, and it reopens the port after).
        *port = unsafe {
            OutPort {
                next: base.add(ch.out_len),
                end: base.add(ch.out_len + room),
            }
        };
    }

    pub(super) fn sync_out(&mut self, c: ChanId) {
        let (Some(ch), Some(port)) = (
            self.chans.get_mut(c as usize),
            self.outs.get_mut(c as usize),
        ) else {
            return;
        };
        if port.next.is_null() {
            return;
        }
        let base = ch.output.as_ptr();
        // SAFETY: as in `sync_in`: the port points into this buffer.
        let at = unsafe { port.next.cast_const().offset_from(base) };
        if at >= 0 && (at as usize) <= ch.output.len() {
            ch.out_len = at as usize;
        }
        *port = empty_out();
    }
}

pub(super) fn self_name(names: &[String], f: ExternId) -> String {
    names
        .get(f as usize)
        .cloned()
        .unwrap_or_else(|| format!("#{f}"))
}

pub(super) fn empty_in() -> InPort {
    InPort {
        next: std::ptr::null(),
        end: std::ptr::null(),
    }
}

pub(super) fn empty_out() -> OutPort {
    OutPort {
        next: std::ptr::null_mut(),
        end: std::ptr::null_mut(),
    }
}

// The trampolines generated code calls. Each turns `host` back into the
// runtime's `Host`; nothing in them unwinds (callbacks run under
// `catch_unwind`, every index is checked).

pub(super) unsafe extern "C" fn rt_call(host: *mut c_void, f: u32, args: *const i64) -> i64 {
    // SAFETY: `host` is the `Host` the machine boxed and handed to the code
    // (`Ctx::host`, `HostHooks::host`); the machine is inside `run` and holds
    // no reference to it while generated code runs.
    let host = unsafe { &mut *host.cast::<Host>() };
    let n = host.extern_arity.get(f as usize).copied().unwrap_or(0);
    let args = if n == 0 || args.is_null() {
        &[][..]
    } else {
        // SAFETY: generated code passes the address of the call's `n`
        // arguments (the function's arity, checked by the front end).
        unsafe { std::slice::from_raw_parts(args, n) }
    };
    host.call(f, args).unwrap_or(0)
}

pub(super) unsafe extern "C" fn rt_recv(host: *mut c_void, chan: u32, dst: *mut i64) -> u32 {
    // SAFETY: as in `rt_call`.
    let host = unsafe { &mut *host.cast::<Host>() };
    let n = host.chans.get(chan as usize).map_or(0, |c| c.arity);
    let mut buf = [0i64; 8];
    let mut big;
    let tmp: &mut [i64] = if n <= buf.len() {
        &mut buf[..n]
    } else {
        big = vec![0; n];
        &mut big
    };
    if !host.recv(chan, tmp) {
        return 0;
    }
    if n > 0 && !dst.is_null() {
        // SAFETY: generated code passes room for one message of the
        // channel (its arity many fields).
        unsafe { std::ptr::copy_nonoverlapping(tmp.as_ptr(), dst, n) };
    }
    1
}

pub(super) unsafe extern "C" fn rt_send(host: *mut c_void, chan: u32, src: *const i64) {
    // SAFETY: as in `rt_call`.
    let host = unsafe { &mut *host.cast::<Host>() };
    let n = host.chans.get(chan as usize).map_or(0, |c| c.arity);
    let src = if n == 0 || src.is_null() {
        &[][..]
    } else {
        // SAFETY: generated code passes one message of the channel.
        unsafe { std::slice::from_raw_parts(src, n) }
    };
    host.send(chan, src);
}
