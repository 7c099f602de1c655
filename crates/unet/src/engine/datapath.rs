//! The data path: rounds over the endpoints, transmit, delivery and the
//! inbox drain. [`Engine::service`] takes an endpoint's transmit
//! descriptors, [`Engine::poll_transport`] what the transport received,
//! [`Engine::poll`] does a round of both over every endpoint (round-robin,
//! within [`Budgets::round_time`] on threads shared by every endpoint), and
//! [`Engine::drain`] runs the frames waiting in an applet's inbox. Frames
//! are classified by the engine's dpf table and delivered, or counted.

use super::*;
use crate::biased::BiasedGuard;

/// The points of [`Engine::pump_drained`] where a unit test parks the
/// draining thread, to run another thread's `doTx` in between: `Pump`,
/// the receive lock let go and the frames not yet sent (the transmit
/// side held); `Handed`, the frames handed back to the receive side's
/// outbox and the transmit side not yet taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Window {
    Pump,
    Handed,
}

/// What a unit test runs at a [`Window`].
#[cfg(test)]
type WindowHook = Box<dyn FnMut(Window)>;

#[cfg(test)]
thread_local! {
    /// The test's hook at a [`Window`], on its own thread alone.
    pub(super) static AT_WINDOW: std::cell::RefCell<Option<WindowHook>> =
        const { std::cell::RefCell::new(None) };
}

#[cfg(test)]
fn at_window(w: Window) {
    AT_WINDOW.with(|h| {
        if let Some(f) = h.borrow_mut().as_mut() {
            f(w);
        }
    });
}

/// Nothing outside the unit tests.
#[cfg(not(test))]
#[inline(always)]
fn at_window(_: Window) {}

/// Empty polls after which an engine thread stops spinning and yielding
/// and sleeps between polls ([`Engine::start`]).
const IDLE_POLLS: u32 = 1000;
/// An idle engine thread's sleep between polls while the engine has
/// endpoints (whose rings it must poll).
const IDLE_NAP: Duration = Duration::from_micros(50);
/// The longest sleep of an engine thread while the engine has no
/// endpoint: it wakes at once when one is added, the engine stops or the
/// transport's poll descriptor turns readable, and after this time to look
/// at a transport without one (`loop`) or at the backlog.
const IDLE_SLEEP: Duration = Duration::from_millis(100);

impl Engine {
    /// Services endpoint `id`'s transmit queue once (up to a budget of
    /// descriptors), delivering what it took. Returns the descriptors taken.
    ///
    /// On a thread shared by every endpoint (the engine's own, or any
    /// caller of [`Engine::poll`] that is not the endpoint's application)
    /// an applet's descriptors are served within [`Budgets::round_time`]
    /// and not at all while it is throttled: the rest waits for a later
    /// round, which such a thread always comes back for. On the thread
    /// that runs the endpoint's application ([`Port::claim`]) neither
    /// applies: it spends its own time, and may be the only thread that
    /// ever drives the endpoint, so it takes every descriptor it can.
    pub fn service(&self, port: &Port) -> usize {
        // Only an applet's descriptors depend on the thread: its token (a
        // thread-local) is read for an endpoint with one, not per message
        // of one without.
        // Which thread this is, asked once: `take_tx_applet` uses the
        // answer instead of asking again.
        let mut shared = None;
        if port.has_applet.load(Ordering::Relaxed) {
            let theirs = !port.is_owner();
            if theirs && port.throttled() {
                return 0;
            }
            shared = Some(theirs);
        }
        let Some(mut tx) = port.tx.try_lock() else {
            return 0;
        };
        let taken = match shared {
            Some(theirs) => self.take_tx_applet(&mut tx, port, theirs),
            None => self.take_tx(&mut tx, port, None, 0, Duration::ZERO),
        };
        if taken > 0 {
            // Delivered with the transmit side still locked: the next
            // descriptors of this endpoint wait until these have arrived.
            // The frames are pumped from the framer's outbox in place, with
            // the transmit side's own scratch outbox for the frames their
            // delivery makes: no outbox changes hands per message.
            let TxSide { framer, next, .. } = &mut *tx;
            if !framer.out.is_empty() {
                self.pump_sent(port, framer, next);
            }
            // Only now, with every byte of these messages copied (a frame
            // to an endpoint of this engine reads the rest of its message
            // from the sender's buffer area during delivery), do the
            // descriptors complete: once the application sees the index
            // move, no byte of the message will be read again.
            tx.tx.publish();
        }
        taken
    }

    /// The receive work an application's call drives for its endpoint
    /// `port` when it finds the receive queue empty (`Embedded::drive_rx`,
    /// and [`crate::Endpoint::recv_ref`] directly): the thread claims the
    /// endpoint ([`Port::claim`]), the frames waiting in its inbox run
    /// ([`Engine::drain`]), and the transport is polled
    /// ([`Engine::poll_transport`]). The frames run and received: 0 if
    /// nothing was done, and also where it cannot tell (another thread
    /// held the receive side, or the transport failed after delivering
    /// some): the caller then skips its second look at the queue, and
    /// sees what came at its next poll. A turn of latency, never a message
    /// missed: no receiver sleeps on this count.
    ///
    /// The transport's poll is called only when its own first two tests
    /// (the backlog's flag, the transport's readiness) say it has work,
    /// made here inline: an idle poll was a call with a frame of six saved
    /// registers and a stack of 232 bytes for two loads and an indirect
    /// call, on every empty poll of a waiting receiver (whose turn is the
    /// delay before it sees a message that lands just after a look).
    ///
    /// The thread's token is read once, for the claim, the owner's test
    /// and the receive lock (a receiver that finds its queue empty and a
    /// frame in its applet's inbox read it three times). The drain stays
    /// a call here ([`Engine::drain_waiting`]): inline, its frame made
    /// `Embedded::drive_rx`, which calls this, 9 instructions longer
    /// when there is nothing to drain (`unet-count deliver`).
    #[inline(always)]
    pub(crate) fn drive_rx(&self, port: &Port) -> usize {
        let me = Me::current();
        port.claim_as(me);
        let n = if port.inbox.is_empty() {
            0
        } else {
            self.drain_waiting(port, me)
        };
        self.and_transport(n)
    }

    /// [`Engine::drive_rx`] once [`Engine::rx_poll`] found frames in the
    /// inbox, on the thread `me` that it claimed `port` for: the same
    /// work without the claim and the inbox's test made again, and the
    /// owner's drain inline ([`Engine::drain_claimed`]; its caller,
    /// `Endpoint::recv_ref_inbox`, is the receive call that found frames
    /// waiting, every message of a ping-pong between two threads).
    #[inline(always)]
    pub(crate) fn drive_rx_inbox(&self, port: &Port, me: Me) -> usize {
        let n = self.drain_claimed(port, me);
        self.and_transport(n)
    }

    /// The end of [`Engine::drive_rx`]: the transport polled if it has
    /// work, and the frames run (`n`) and received.
    #[inline(always)]
    fn and_transport(&self, n: usize) -> usize {
        if self.transport_idle() {
            return n;
        }
        n + self.poll_transport()
    }

    /// [`Engine::drive_rx`]'s tests alone, for a receiver's empty poll,
    /// inline in its loop: the thread `me` claims `port`, and whether
    /// driving it now would do nothing ([`RxPoll::Idle`]: its inbox empty,
    /// the transport idle), would run frames waiting in its inbox
    /// ([`RxPoll::Inbox`], for [`Engine::drive_rx_inbox`]) or poll the
    /// transport ([`RxPoll::Transport`]).
    #[inline(always)]
    pub(crate) fn rx_poll(&self, port: &Port, me: Me) -> RxPoll {
        port.claim_as(me);
        if !port.inbox.is_empty() {
            return RxPoll::Inbox;
        }
        // The receiver waits: the next frame's lines asked for. Past the
        // test, so that a poll that finds frames does not ask; the
        // waiting poll that first sees a frame's tail has asked all the
        // same, speculatively, its branch predicted to find none. Only
        // here, a receive call's idle poll: `drive_rx` (`poll_engine`, a
        // receive call with buffers to give back) does not ask, so that
        // an engine driven between messages pays nothing for it (on one
        // thread, `unet-count dorx`, 42 instructions a message: the
        // applet's frame ran in the send, and each `poll_engine` after
        // asked for the next one's lines).
        port.inbox.prefetch_next();
        if self.transport_idle() {
            RxPoll::Idle
        } else {
            RxPoll::Transport
        }
    }

    /// Whether a receiver's empty poll would find nothing to drive
    /// ([`Engine::rx_poll`]'s [`RxPoll::Idle`]), claiming `port`.
    #[cfg(test)]
    pub(crate) fn rx_idle(&self, port: &Port) -> bool {
        matches!(self.rx_poll(port, Me::current()), RxPoll::Idle)
    }

    /// Whether [`Engine::poll_transport`] would find nothing to do now: no
    /// backlog, and a transport whose readiness says it holds nothing
    /// (the same two tests it makes first, in its order).
    #[inline(always)]
    fn transport_idle(&self) -> bool {
        !self.inner.has_backlog.load(Ordering::Acquire)
            && self.inner.readiness.as_ref().is_some_and(|ready| !ready())
    }

    /// Polls the transport once (up to a budget of frames), delivering what
    /// arrived. Returns the frames received.
    pub fn poll_transport(&self) -> usize {
        let backlog = self.drain_backlog();
        if self.inner.readiness.as_ref().is_some_and(|ready| !ready()) {
            return backlog;
        }
        let Ok(mut t) = self.inner.transport.try_lock() else {
            return backlog;
        };
        let mut made = outbox();
        let n = t
            .recv(RX_BUDGET, &mut |f: &[u8]| {
                // Under the transport's lock: one thread at a time.
                bump(&self.inner.stats.frames_in);
                if frame::FrameHeader::parse(f).is_err() {
                    bump_shared(&self.inner.stats.malformed);
                    return;
                }
                self.deliver(f, None, &mut made);
            })
            .unwrap_or(0);
        drop(t);
        self.pump_owned(made);
        n + backlog
    }

    /// One round over every endpoint and the transport; the work done.
    ///
    /// Endpoints are served round-robin: each round starts one endpoint
    /// further than the last (so one left waiting by its round's budget,
    /// [`Budgets::round_time`], is early in a later round), and threads
    /// that find an endpoint busy with another thread go on to the next.
    pub fn poll(&self) -> usize {
        let ports = self.inner.ports.load_full();
        let mut work = 0;
        let n = ports.len();
        if n > 0 {
            let first = self.inner.cursor.fetch_add(1, Ordering::Relaxed) % n;
            for p in ports[first..].iter().chain(&ports[..first]).flatten() {
                work += self.service(p) + self.drain(p);
            }
        }
        work + self.poll_transport()
    }

    /// Gives the engine `n` threads of its own, polling every endpoint and
    /// the transport (the LanAI's loop; each starts its rounds at another
    /// endpoint and skips those another thread is serving, see
    /// [`Engine::poll`]), until [`Engine::stop`] (they hold
    /// the engine: stop them before dropping it). Fails if the system
    /// refuses a thread; those already started keep running.
    ///
    /// A thread that finds no work spins, then yields, then (after 1,000
    /// empty polls) sleeps 50 µs between polls: the endpoints' rings have
    /// no descriptor to wake it. While the engine has no endpoint at all it
    /// blocks instead until one is added, the engine is stopped or the
    /// transport's poll descriptor ([`Transport::poll_fd`]) turns readable,
    /// and for at most 100 ms at a time (to look at a transport without
    /// one, `loop`).
    pub fn start(&self, n: usize) -> std::io::Result<()> {
        // The descriptor stays open while the transport lives, which the
        // threads' clones of the engine keep.
        let poll_fd = lock(&self.inner.transport).poll_fd();
        let mut threads = lock(&self.inner.threads);
        for i in 0..n {
            let e = self.clone();
            let h = std::thread::Builder::new()
                .name(format!("unet-engine-{i}"))
                .spawn(move || {
                    // None if the system refuses an eventfd: the thread
                    // then naps between polls even without endpoints.
                    let bell = ports::Bell::new();
                    let mut idle = 0u32;
                    while !e.inner.stop.load(Ordering::Acquire) {
                        if e.poll() > 0 {
                            idle = 0;
                        } else {
                            idle = idle.saturating_add(1);
                            if idle > IDLE_POLLS {
                                if idle == IDLE_POLLS + 1 {
                                    // Sleeping from now on: flagged out
                                    // of the shared code cache (the
                                    // paper's system-call flag) until it
                                    // next runs an applet, so that code
                                    // retired meanwhile is freed without
                                    // waiting for this thread.
                                    jive::jit::park();
                                }
                                match &bell {
                                    Some(bell) if e.inner.ports.is_empty() => {
                                        e.inner.ports.sleep_while_empty(
                                            bell,
                                            poll_fd,
                                            IDLE_SLEEP,
                                            || e.may_sleep(),
                                        );
                                    }
                                    _ => std::thread::sleep(IDLE_NAP),
                                }
                            } else if idle > 64 {
                                std::thread::yield_now();
                            } else {
                                std::hint::spin_loop();
                            }
                        }
                    }
                })?;
            threads.push(h);
        }
        Ok(())
    }

    /// Whether an engine thread without endpoints may sleep: the engine is
    /// not stopping, no frames wait in its backlog, and the transport does
    /// not say it has frames (one without a lock-free test is asked by
    /// its poll descriptor, or after [`IDLE_SLEEP`]).
    fn may_sleep(&self) -> bool {
        !self.inner.stop.load(Ordering::Acquire)
            && !self.inner.has_backlog.load(Ordering::Acquire)
            && self.inner.readiness.as_ref().is_none_or(|ready| !ready())
    }

    /// Stops the engine's own threads and waits for them.
    pub fn stop(&self) {
        self.inner.stop.store(true, Ordering::Release);
        // Threads asleep for want of endpoints look at the flag now.
        self.inner.ports.wake();
        let threads: Vec<_> = lock(&self.inner.threads).drain(..).collect();
        for t in threads {
            let _ = t.join();
        }
        self.inner.stop.store(false, Ordering::Release);
    }

    /// [`Engine::pump`] of an outbox from the thread's spares, which it
    /// goes back to.
    pub(super) fn pump_owned(&self, mut out: Outbox) {
        // Most polls find nothing: return the outbox untouched.
        if out.is_empty() {
            recycle(out);
            return;
        }
        let mut next = outbox();
        self.pump(&mut out, &mut next);
        recycle(out);
        recycle(next);
    }

    /// Sends or delivers every frame of `out`, and the frames that
    /// delivering them makes (in `next`, a scratch outbox), round after
    /// round. Both are empty when it returns (frames left after
    /// [`PUMP_ROUNDS`] rounds go to the engine's backlog).
    pub(super) fn pump(&self, out: &mut Outbox, next: &mut Outbox) {
        if out.is_empty() {
            return;
        }
        let (mut out, mut next) = (out, next);
        for _ in 0..PUMP_ROUNDS {
            if out.is_empty() {
                break;
            }
            let mut remote: Vec<&[u8]> = Vec::new();
            for (f, tail) in out.iter() {
                if frame::peek_dst(f) == Some(self.inner.local) {
                    self.deliver(f, tail, next);
                } else {
                    // Only frames to this engine leave part of their
                    // payload behind.
                    debug_assert!(tail.is_none());
                    remote.push(f);
                }
            }
            if !remote.is_empty() {
                self.send_remote(&remote);
            }
            out.clear();
            std::mem::swap(&mut out, &mut next);
        }
        if !out.is_empty() {
            lock(&self.inner.backlog).append(out);
            self.inner.has_backlog.store(true, Ordering::Release);
        }
        out.trim();
        next.trim();
    }

    /// [`Engine::pump`] of the frames `port`'s transmit side made (in
    /// `framer.out`; `next` is the scratch outbox): in the first round, a
    /// frame `port` sent on a channel to an endpoint of this engine (an
    /// applet's `txPush` in `doTx`, or a message [`Engine::deliver_direct`]
    /// left to the outbox) is delivered with the channel's kept verdict,
    /// as [`Engine::deliver_kept`] delivers a message, instead of being
    /// classified; the others as [`Engine::pump`] delivers them. The
    /// frames their delivery makes follow in later rounds, as in
    /// [`Engine::pump`].
    ///
    /// A frame's channel is its tag ([`sent_on`]), honoured only if it
    /// names `port`: tags are never reused and a channel's header never
    /// changes but to close, and the channels are read under the transmit
    /// side's lock, which every change of them takes.
    #[inline(always)]
    pub(super) fn pump_sent(&self, port: &Port, framer: &mut Framer, next: &mut Outbox) {
        let version = self.inner.verdicts.load(Ordering::Acquire);
        let mine = u64::from(port.id);
        let Framer { channels, out, .. } = framer;
        // Whether a frame goes to another engine: those are gathered and
        // sent after the loop, only if there are any.
        let mut remote = false;
        for (f, tail, tag) in out.tagged() {
            // A frame `port` sent on an open channel to an endpoint of
            // this engine goes to that endpoint: its header is the
            // channel's, whose destination is this engine (`local`), so
            // that its destination need not be read from the frame.
            if version != 0
                && tag >> 16 == mine
                && let Some((hdr, head)) = f.split_first_chunk::<HEADER_LEN>()
                && let Some(Some(ch)) = channels.get_mut((tag & 0xffff) as usize)
                && ch.goes_kept()
            {
                let payload = Payload {
                    app: false,
                    head,
                    tail: tail.map(Tail::rest),
                };
                self.keep(ch, version, payload.len());
                self.deliver_kept::<false>(port, &ch.verdict, hdr, false, &payload, next);
                continue;
            }
            if frame::peek_dst(f) != Some(self.inner.local) {
                // Only frames to this engine leave part of their payload
                // behind.
                debug_assert!(tail.is_none());
                remote = true;
                continue;
            }
            self.deliver(f, tail, next);
        }
        if remote {
            self.send_remote_of(out);
        }
        out.clear();
        // The frames those deliveries made, with the emptied outbox as the
        // scratch one (most deliveries make none: no call then).
        if !next.is_empty() {
            self.pump(next, out);
        }
    }

    /// Pumps the frames an earlier pump left.
    pub(super) fn drain_backlog(&self) -> usize {
        if !self.inner.has_backlog.load(Ordering::Acquire) {
            return 0;
        }
        let out = {
            let Ok(mut b) = self.inner.backlog.try_lock() else {
                return 0;
            };
            self.inner.has_backlog.store(false, Ordering::Release);
            std::mem::replace(&mut *b, outbox())
        };
        let n = out.frames.len();
        self.pump_owned(out);
        n
    }

    /// [`Engine::send_remote`] of the frames of `out` for another engine,
    /// in order ([`Engine::pump_sent`]'s, which delivered the others):
    /// out of line, so that a pump of frames to this engine alone carries
    /// no list of them.
    #[inline(never)]
    fn send_remote_of(&self, out: &Outbox) {
        let remote: Vec<&[u8]> = out
            .iter()
            .map(|(f, _)| f)
            .filter(|f| frame::peek_dst(f) != Some(self.inner.local))
            .collect();
        self.send_remote(&remote);
    }

    pub(super) fn send_remote(&self, frames: &[&[u8]]) {
        let s = &self.inner.stats;
        let mut t = lock(&self.inner.transport);
        let mut sent = 0;
        // A transport may accept part of a batch when its queue fills; what
        // it refuses is counted, never retried forever.
        for _ in 0..4 {
            match t.send(&frames[sent..]) {
                Ok(n) => sent += n,
                Err(_) => break,
            }
            if sent == frames.len() {
                break;
            }
        }
        s.frames_out.fetch_add(sent as u64, Ordering::Relaxed);
        s.send_errors
            .fetch_add((frames.len() - sent) as u64, Ordering::Relaxed);
    }

    /// Classifies one frame and hands it to its endpoint; frames the
    /// endpoint's applet makes go to `made`.
    pub(super) fn deliver(&self, f: &[u8], tail: Option<&Tail>, made: &mut Outbox) {
        let s = &self.inner.stats;
        let Some(owner) = self.classify(f) else {
            bump_shared(&s.unmatched);
            return;
        };
        let (slot, chan) = ((owner >> 16) as u16, owner as u16);
        // A reference while the table is pinned, not a clone: no atomic
        // write to the port's reference count per frame.
        self.inner.ports.with(
            |ports| match ports.get(usize::from(slot)).and_then(Option::as_ref) {
                Some(port) => self.deliver_to(port, chan, f, tail, made),
                None => bump_shared(&s.unmatched),
            },
        )
    }

    /// [`Engine::deliver`] once the frame's endpoint is found.
    #[inline]
    fn deliver_to(&self, port: &Port, chan: u16, f: &[u8], tail: Option<&Tail>, made: &mut Outbox) {
        let s = &self.inner.stats;
        if f.len() < HEADER_LEN {
            bump_shared(&s.malformed);
            return;
        }
        // The filters match the destination's generation, but a thread may
        // have classified with a table from before the slot changed hands.
        let dst_gen = u16::from_be_bytes([f[frame::UNET_DST_GEN], f[frame::UNET_DST_GEN + 1]]);
        if dst_gen != endpoint_generation(port.id) {
            bump_shared(&s.unmatched);
            return;
        }
        // An applet's frame waits in the inbox for its endpoint's thread,
        // unless this is that thread.
        // So does one whose applet would add to frames already past the
        // inbox budget: frames made by applets delivering on their own
        // thread cannot pile up without bound.
        if port.waits_in_inbox(made) {
            enqueue(port, chan, f, tail, s);
            return;
        }
        let mut rx = port.rx.lock();
        if port.closed.load(Ordering::Acquire) {
            bump_shared(&s.closed);
            return;
        }
        // Frames still waiting for an applet removed since keep their
        // place: this one waits behind them.
        if !port.inbox.is_empty() {
            drop(rx);
            enqueue(port, chan, f, tail, s);
            return;
        }
        receive(port, &mut rx, chan, f, tail, made, false);
        rx.io.publish();
    }

    /// Runs the frames waiting in `port`'s inbox through its applet (or the
    /// standard receive, if the applet was removed since), in order, on
    /// this thread; returns how many. Called by the endpoint's receive
    /// calls and by the engine's threads; one thread drains at a time (the
    /// holder of the receive lock), and it runs every frame waiting: a
    /// batch per wake-up.
    ///
    /// Like [`Engine::service`], a thread shared by every endpoint runs an
    /// applet's frames within [`Budgets::round_time`] and not while it is
    /// throttled (the rest stays in the inbox, in order, for a later
    /// round); the application's own thread drains everything waiting,
    /// up to the bound of one `Inbox::drain` call (under twice the
    /// inbox's frame budget: frames that keep coming wait for its next
    /// poll, so that a flood cannot keep it here).
    #[inline]
    pub fn drain(&self, port: &Port) -> usize {
        if port.inbox.is_empty() {
            return 0;
        }
        self.drain_waiting(port, Me::current())
    }

    /// [`Engine::drain`] once frames wait, on the thread `me`: out of
    /// line, so that a poll of an empty inbox (every `poll_engine` and
    /// receive call that finds nothing) makes one test and no call.
    #[inline(never)]
    fn drain_waiting(&self, port: &Port, me: Me) -> usize {
        let shared = port.owner.load(Ordering::Relaxed) != me.token();
        if shared && port.has_applet.load(Ordering::Relaxed) && port.throttled() {
            return 0;
        }
        let Some(guard) = port.rx.try_lock_as(me) else {
            return 0;
        };
        if shared {
            self.drain_locked::<true>(port, guard)
        } else {
            self.drain_locked::<false>(port, guard)
        }
    }

    /// [`Engine::drain`] once frames wait, on the thread `me` that has
    /// just claimed `port` ([`Engine::drive_rx_inbox`]), inline there. The
    /// owner's test is still made (it is what `drain_waiting` tests: were
    /// the endpoint claimed by another thread since, this one's drain is
    /// a shared thread's, timed and held back while throttled), with the
    /// token read once; the owner's drain is a copy of its own
    /// (`drain_locked::<false>`), without the time's sum and test per
    /// frame.
    #[inline(always)]
    fn drain_claimed(&self, port: &Port, me: Me) -> usize {
        if port.owner.load(Ordering::Relaxed) != me.token() {
            return self.drain_waiting(port, me);
        }
        let Some(guard) = port.rx.try_lock_as(me) else {
            return 0;
        };
        self.drain_locked::<false>(port, guard)
    }

    /// The drain itself, under the receive lock (`guard`), on a thread
    /// that is not the endpoint's owner (`SHARED`: each frame's applet
    /// time summed, and the rest left for a later round once the round's
    /// time is spent or the applet overran) or on the owner's.
    #[inline(always)]
    fn drain_locked<const SHARED: bool>(
        &self,
        port: &Port,
        mut guard: BiasedGuard<'_, RxSide>,
    ) -> usize {
        if port.closed.load(Ordering::Acquire) {
            // Removed: what is left is counted as lost to the closing.
            let n = port.clear_inbox(&guard);
            bump_shared_by(&self.inner.stats.closed, n);
            return 0;
        }
        // No outbox until a `doRx` answers: then one is made and takes a
        // spare outbox ([`Outbox::append`]). A spare one taken here and
        // given back after every drain, most of which make no frame, was
        // some 130 instructions a drain (the thread-local pool's
        // look-ups, the 80-byte moves), a drain a message in a ping-pong;
        // an empty one made here, its ten words written and its drop
        // called after the drain, still 44.
        //
        // Three locals the closure borrows, not a struct: the drain is
        // inlined here (`Inbox::drain`), so its closure is no value passed
        // by reference, and a local whose address nothing takes stays out
        // of memory where it can (`spent`, unread on the owner's thread,
        // is not even stored; in a struct that `made`'s `append` reached,
        // every field was written at the start of each drain).
        let mut made: Option<Outbox> = None;
        let mut n = 0usize;
        let mut spent = Duration::ZERO;
        // The receive side is the drain's to give (`Port::drain_inbox`,
        // whose proof that the inbox's consumer is this thread is
        // `guard`). Each frame or message is read in place, in the
        // inbox's ring.
        port.drain_inbox(&mut guard, |rx, chan, framed, bytes| {
            let payload = if framed {
                frame_payload(port, bytes, None)
            } else {
                Some(Payload {
                    app: false,
                    head: bytes,
                    tail: None,
                })
            };
            if let Some(payload) = payload {
                let took = run_payload::<true>(port, rx, chan, payload, SHARED);
                let out = &mut rx.io.framer.out;
                if !out.is_empty() {
                    made.get_or_insert_default().append(out);
                    out.clear();
                }
                // Timed only on a shared thread (the owner's drain takes
                // everything, untimed): no `Duration` sum per frame there.
                if SHARED {
                    spent += took;
                }
            }
            n += 1;
            // The batch's descriptors are published together, at most
            // `PUBLISH_EVERY` frames apart so the application sees the
            // first ones while the rest run.
            if n.is_multiple_of(PUBLISH_EVERY) {
                rx.io.publish();
            }
            // The rest waits in the inbox for a later round.
            !(SHARED
                && (spent > port.budgets.round_time
                    || port.throttle_until.load(Ordering::Relaxed) != 0))
        });
        guard.io.publish();
        match made {
            None => drop(guard),
            Some(made) => {
                // `doRx` answered: the endpoint sent (`Inbox::answered`).
                port.inbox_answered(&guard);
                self.pump_drained(port, guard, made)
            }
        }
        n
    }

    /// Sends the frames `port`'s applet made in a drain (`made`, not
    /// empty), in their place among the frames of its `doTx`s: under the
    /// endpoint's transmit lock, under which every `doTx` runs and its
    /// frames are sent ([`Engine::service`], [`applet_tx`]). Without it a
    /// `doTx` on another thread could run once the receive lock is let go
    /// and send its frames before these, which its applet made first (a
    /// channel's messages out of order: `Burst25`'s queued requests, sent
    /// by `doRx` when an acknowledgement returns, behind a later request
    /// its `doTx` sent at once).
    ///
    /// Taken by `try_lock` while the receive lock is held (the order of
    /// the two locks is transmit, then receive). If another thread holds
    /// the transmit side (it may be waiting for this receive lock to run
    /// `doTx`), the frames go back into the receive side's outbox, where
    /// the next `doTx` finds them and sends them ahead of its own
    /// ([`applet_tx`]; no deferred `txPush` while they wait there), and
    /// this thread, once it holds the transmit side, sends whatever is
    /// still there (and [`Engine::set_applet`] sends them if the applet
    /// goes first). No frame is dropped or counted twice: each leaves that
    /// outbox once, under the receive lock.
    ///
    /// While this holds the transmit side, [`Engine::service`] on another
    /// thread finds it taken and leaves the transmit queue for its next
    /// round: an application's descriptor pushed then waits that long
    /// (nothing is lost). Out of line, not cold: every drain whose applet
    /// answers comes here.
    #[inline(never)]
    fn pump_drained(&self, port: &Port, mut guard: BiasedGuard<'_, RxSide>, mut made: Outbox) {
        if let Some(tx) = port.tx.try_lock() {
            drop(guard);
            at_window(Window::Pump);
            self.pump_owned(made);
            drop(tx);
            return;
        }
        let out = &mut guard.io.framer.out;
        if out.is_empty() {
            std::mem::swap(out, &mut made);
        } else {
            // Not reached (the drain took them all into `made`); kept in
            // order if it ever is.
            out.append(&made);
        }
        drop(guard);
        recycle(made);
        at_window(Window::Handed);
        let tx = port.tx.lock();
        let mut left = outbox();
        {
            let mut rx = port.rx.lock();
            if !rx.io.framer.out.is_empty() {
                std::mem::swap(&mut rx.io.framer.out, &mut left);
            }
        }
        self.pump_owned(left);
        drop(tx);
    }

    #[inline]
    pub(super) fn classify(&self, f: &[u8]) -> Option<u32> {
        READERS.with(|r| {
            let mut r = r.borrow_mut();
            if let Some((_, reader)) = r.iter_mut().find(|(id, _)| *id == self.inner.id) {
                return reader.classify(f);
            }
            let mut reader = lock(&self.inner.table).reader();
            let v = reader.classify(f);
            if r.len() >= 8 {
                r.remove(0);
            }
            r.push((self.inner.id, reader));
            v
        })
    }
}

/// What a receiver's empty poll finds for the engine to do for its
/// endpoint ([`Engine::rx_poll`]), in the order it tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RxPoll {
    /// Frames wait in the applet's inbox.
    Inbox,
    /// Nothing: the inbox empty, the transport idle.
    Idle,
    /// The inbox empty; the transport has work (or a backlog).
    Transport,
}

/// Puts a frame in `port`'s inbox for its applet, or drops it, counted as
/// [`open_inbox`] and [`count_refused`] count.
pub(super) fn enqueue(port: &Port, chan: u16, f: &[u8], tail: Option<&Tail>, s: &EngineStats) {
    // Never: frames shorter than a header are counted as malformed before
    // delivery.
    if f.len() < HEADER_LEN {
        bump_shared(&s.malformed);
        return;
    }
    let frame = Payload {
        app: false,
        head: f,
        tail: tail.map(Tail::rest),
    };
    if let Some(inbox) = open_inbox(port, s) {
        // Written in place in the inbox's ring (all of its bytes).
        let pushed = inbox.push(chan, frame.len(), |buf| {
            frame.copy_to(0, buf, crate::shm::copy_message)
        });
        count_refused(port, s, pushed);
    }
}

/// Puts the message `payload` in `port`'s inbox without a frame
/// ([`inbox::Inbox::push_message`]), for a sender that holds the verdict
/// that delivers it on `chan` (a kept delivery: a local, unchecksummed
/// channel), or drops it, counted as [`enqueue`] counts.
#[inline(always)]
fn enqueue_message(port: &Port, chan: u16, payload: &Payload<'_>, s: &EngineStats) {
    if let Some(inbox) = open_inbox(port, s) {
        let pushed = inbox.push_message(chan, payload.len(), |buf| {
            payload.copy_to(0, buf, crate::shm::copy_message)
        });
        count_refused(port, s, pushed);
    }
}

/// [`enqueue_message`] of a message in one piece, `msg`, filled by
/// [`crate::shm::copy_message`], whose way of writing the inbox's lines
/// showed in the round trip from 57 bytes up. (`Payload::copy_to`, which
/// also reads a tail, cost 34 instructions of a 40-byte message on the
/// demo's two threads, with its copy; a `copy_from_slice` here, inlined
/// into the push, 11 in `memcpy` and its call; `shm::copy_small` inlined
/// 20, LLVM having merged its branches' second copies into one `memcpy`
/// call; `copy_message` makes the fill a call of its own, 12 more than
/// `copy_from_slice` up to 56 bytes.)
/// The producers' lock is taken with the thread's token `me`, read by the
/// caller for its own locks ([`inbox::Inbox::push_message_as`]): its
/// thread-local read here too cost 4 instructions a message.
#[inline(always)]
fn enqueue_bytes(port: &Port, chan: u16, msg: &[u8], s: &EngineStats, me: Me) {
    if let Some(inbox) = open_inbox(port, s) {
        let pushed = inbox.push_message_as(me, chan, msg.len(), |buf| {
            crate::shm::copy_message(buf, msg)
        });
        count_refused(port, s, pushed);
    }
}

/// `port`'s inbox, or `None` counted as closed if the endpoint is.
#[inline(always)]
fn open_inbox<'a>(port: &'a Port, s: &EngineStats) -> Option<&'a inbox::Inbox> {
    if port.closed.load(Ordering::Acquire) {
        bump_shared(&s.closed);
        return None;
    }
    Some(&port.inbox)
}

/// Counts an entry the inbox refused: as a full receive queue if it is at
/// its budget of frames or bytes ([`Budgets::inbox_frames`],
/// [`Budgets::inbox_bytes`]), as closed if the endpoint's removal closed
/// it after [`open_inbox`]'s test (see `inbox.rs`).
#[inline(always)]
fn count_refused(port: &Port, s: &EngineStats, pushed: Result<(), inbox::Refused>) {
    match pushed {
        Ok(()) => {}
        Err(inbox::Refused::Full) => bump_shared(&port.stats.rx_queue_full),
        Err(inbox::Refused::Closed) => bump_shared(&s.closed),
    }
}

/// Receives one frame for `port` on `chan`, under its receive lock: checks
/// the UDP checksum if it carries one, then runs `doRx` or the standard
/// U-Net receive. Frames the applet makes go to `made`. Returns the
/// applet's time if `timed` (see [`invoke`]).
#[inline]
pub(super) fn receive(
    port: &Port,
    rx: &mut RxSide,
    chan: u16,
    f: &[u8],
    tail: Option<&Tail>,
    made: &mut Outbox,
    timed: bool,
) -> Duration {
    match frame_payload(port, f, tail) {
        Some(payload) => receive_payload::<true>(port, rx, chan, payload, made, timed),
        None => Duration::ZERO,
    }
}

/// The payload of frame `f` (with `tail`), once its UDP checksum, if it
/// carries one, is checked; `None`, counted as `rx_bad_checksum`, if wrong.
#[inline(always)]
fn frame_payload<'a>(port: &Port, f: &'a [u8], tail: Option<&'a Tail>) -> Option<Payload<'a>> {
    let flags = u16::from_be_bytes([f[frame::UNET_FLAGS], f[frame::UNET_FLAGS + 1]]);
    if flags & frame::FLAG_UDP_CHECKSUM != 0 && !matches!(frame::verify_udp_checksum(f), Ok(true)) {
        bump(&port.stats.rx_bad_checksum);
        return None;
    }
    Some(Payload {
        app: false,
        head: &f[HEADER_LEN..],
        tail: tail.map(Tail::rest),
    })
}

/// The end of [`receive`], once the frame's checksum (if it has one) is
/// checked, on its payload alone: `doRx` sees `RxBuf` filled with the
/// payload and the same arguments whether or not the message came in a
/// frame ([`Engine::deliver_kept`] delivers without one).
///
/// `INLINED`: `doRx`'s invocation inlined ([`run_on`]'s), except in the
/// direct delivery (`Engine::deliver_local_inline`), whose function the
/// path without applet runs: inlined there, it made that path 11
/// instructions a message longer (spills on its other paths).
#[inline(always)]
pub(super) fn receive_payload<const INLINED: bool>(
    port: &Port,
    rx: &mut RxSide,
    chan: u16,
    payload: Payload<'_>,
    made: &mut Outbox,
    timed: bool,
) -> Duration {
    let took = run_payload::<INLINED>(port, rx, chan, payload, timed);
    let out = &mut rx.io.framer.out;
    if !out.is_empty() {
        made.append(out);
        out.clear();
    }
    took
}

/// [`receive_payload`] but for the frames `doRx` made, which it leaves in
/// the receive side's outbox (`rx.io.framer.out`) for the caller to take
/// (an inbox's drain, which makes its outbox only when they are some).
///
/// The standard receive takes a copy of `payload` of its own (it takes
/// it by reference), so that its address is taken on one way fewer.
#[inline(always)]
fn run_payload<const INLINED: bool>(
    port: &Port,
    rx: &mut RxSide,
    chan: u16,
    payload: Payload<'_>,
    timed: bool,
) -> Duration {
    let mut took = Duration::ZERO;
    match rx.applet.as_mut() {
        None => rx.io.deliver_default(chan, &{ payload }),
        Some(l) => {
            // `invoke` on the applet found above, not looked for again.
            let Loaded { applet, do_rx, .. } = l;
            let ran = match do_rx {
                DoRx::Copied { m, rxbuf } => {
                    if fill_rxbuf(applet, rxbuf, &payload) {
                        let args = [payload.len() as i32, i32::from(chan)];
                        Some(run_on::<2, INLINED>(applet, m, &mut rx.io, args, timed))
                    } else {
                        None
                    }
                }
                DoRx::Lent { m, scratch } => {
                    run_lent::<INLINED>(applet, m, scratch, &mut rx.io, &payload, chan, timed)
                }
            };
            let r = match ran {
                Some(ran) => {
                    let (r, t) = settle(rx, port, ran);
                    took = t;
                    r
                }
                None => Outcome::Trapped,
            };
            match r {
                Outcome::Done => {}
                Outcome::Refused => bump(&port.stats.applet_drops),
                Outcome::Trapped => applet_trapped(rx, port),
            }
        }
    }
    took
}

/// Where [`Engine::take_tx`] sends a checked transmit descriptor.
enum Route {
    /// Nowhere more: it completes with this status (rejected, closed, or
    /// delivered without a frame).
    Done(TxStatus),
    /// To its endpoint's applet (`doTx`).
    Applet,
    /// Into a frame: built in the transport's memory where it lends some
    /// and the channel goes to another engine ([`Engine::transmit_built`]),
    /// else in the transmit side's outbox.
    Frame { remote: bool },
}

impl Engine {
    /// Takes up to [`TX_BUDGET`] transmit descriptors of `port`, delivering
    /// each to an endpoint of this engine at once where
    /// [`Engine::deliver_direct`] can, and otherwise making its frames in
    /// the transmit side's outbox.
    ///
    /// On a thread that serves every endpoint (not the endpoint's
    /// application's, [`Port::claim`]) an applet's descriptors stop once
    /// [`Budgets::round_time`] is spent or it overran (see
    /// [`Engine::service`]); which thread this is, `shared`, is asked
    /// once by [`Engine::take_tx_applet`] when it hands the rest of its
    /// pass here (its applet removed), or here at the first applet
    /// descriptor (an applet installed during the pass).
    /// `taken` descriptors of the pass have been taken already (by
    /// [`Engine::take_tx_applet`]), counted against the budget, and
    /// `spent` of the round's applet time, counted against
    /// [`Budgets::round_time`] (a pass whose applet is removed and another
    /// installed does not start the round's time again). Always
    /// inlined, as it was into [`Engine::service`] alone before
    /// `take_tx_rest` called it too: called there, the framed path cost 29
    /// instructions more a message.
    #[inline(always)]
    pub(super) fn take_tx(
        &self,
        tx: &mut TxSide,
        port: &Port,
        shared: Option<bool>,
        taken: usize,
        spent: Duration,
    ) -> usize {
        let (stats, layout) = (&*port.stats, &port.layout);
        let mut n = taken;
        let mut shared = shared;
        // The applet time this round has spent on this endpoint.
        let mut spent = spent;
        let mut done = false;
        // Whether the last descriptor ran `doTx` (its frames are in the
        // outbox).
        let mut made = false;
        // The transport, locked at the first frame built in its memory
        // ([`Framer::transmit_built`]) and held for the pass's next ones,
        // then flushed once: let go before anything that may run an
        // applet (its natives may ask the engine for its counters, which
        // take this lock).
        let mut lent: Option<MutexGuard<'_, Box<dyn Transport>>> = None;
        while n < TX_BUDGET && !done {
            let Some(d) = next_descriptor(&mut tx.tx, n == taken, stats) else {
                break;
            };
            // The frames the last `doTx` made for endpoints of this
            // engine go on before the next `doTx` runs, not at the end of
            // the pass: a receiver on another thread starts on a burst's
            // first message while the sender makes the rest (burst-25's
            // two threads overlap), and the outbox holds one message's
            // frames, still in this core's cache when they are copied into
            // the receiver's inbox, instead of a pass's. Frames for
            // another engine wait for the pass's end, to leave in one
            // batch (the transport's `send`); so do the last descriptor's,
            // delivered by [`Engine::service`] as before (a pass of one
            // message costs nothing more).
            self.pump_made(port, tx, &mut made);
            n += 1;
            bump(&stats.tx_descriptors);
            // `d` is a private copy: everything below checks and uses it,
            // never the shared slot again. The channel's entry is looked
            // up once, for its checks and the direct delivery both.
            let route = {
                let Framer {
                    channels,
                    out,
                    max_message,
                    ..
                } = &mut tx.framer;
                match channels.get_mut(usize::from(d.chan)) {
                    Some(Some(ch)) if d.len <= *max_message && layout.in_area(d.offset, d.len) => {
                        if ch.closed() {
                            bump(&stats.tx_closed);
                            Route::Done(TxStatus::Closed)
                        } else if port.has_applet.load(Ordering::Acquire) {
                            Route::Applet
                        } else if !ch.local() {
                            // Not flushed here: the frames of a pass built
                            // in the transport's memory go out together.
                            Route::Frame { remote: true }
                        } else if self.flush_lent(&mut lent)
                            && self.deliver_direct(out, ch, port, d)
                        {
                            Route::Done(TxStatus::Sent)
                        } else {
                            Route::Frame { remote: false }
                        }
                    }
                    _ => {
                        bump(&stats.tx_rejected);
                        Route::Done(TxStatus::Rejected)
                    }
                }
            };
            let status = match route {
                Route::Done(status) => status,
                Route::Applet => {
                    self.flush_lent(&mut lent);
                    let shared = *shared.get_or_insert_with(|| !port.is_owner());
                    let (status, took) = applet_tx(self, tx, port, d, shared);
                    made = true;
                    // The time is summed only where it is checked.
                    if shared
                        && ({
                            spent += took;
                            spent > port.budgets.round_time
                        } || port.throttle_until.load(Ordering::Relaxed) != 0)
                    {
                        // This round's time for the endpoint is spent, or
                        // its applet overran: the rest waits for a later
                        // round.
                        done = true;
                    }
                    status
                }
                Route::Frame { remote } => {
                    // A remote frame built in place, or else through the
                    // framer (not an `if let` guard: Rust 1.95 and later).
                    let built = if remote {
                        self.transmit_built(tx, port, d, &mut lent)
                    } else {
                        None
                    };
                    match built {
                        Some(status) => status,
                        None => {
                            self.flush_lent(&mut lent);
                            match tx.framer.transmit_from(
                                &port.seg,
                                layout.area + d.offset as usize,
                                d.chan,
                                d.len,
                            ) {
                                Ok(()) => TxStatus::Sent,
                                Err(_) => TxStatus::Dropped,
                            }
                        }
                    }
                }
            };
            tx.tx.write_front(TxDesc {
                status: status as u16,
                ..d
            });
            // Taken, not yet completed: [`Engine::service`] publishes the
            // consumer index after the frames are delivered.
            tx.tx.take();
        }
        self.flush_lent(&mut lent);
        n
    }

    /// [`Engine::take_tx`] for an endpoint with an applet, whose
    /// descriptors go to its `doTx` (`theirs`: on a thread shared by every
    /// endpoint, see [`Engine::service`]): the same checks, counts,
    /// statuses and time budget, in the same order, without the routes of
    /// a descriptor of an endpoint without an applet (the delivery without
    /// a frame, the frame built in the transport's memory), which the pass
    /// carries and checks for nothing here. If the applet is removed during
    /// the pass, [`Engine::take_tx`] takes the rest (the frames of the
    /// last `doTx` still in the outbox, ahead of everything after them).
    #[inline]
    fn take_tx_applet(&self, tx: &mut TxSide, port: &Port, theirs: bool) -> usize {
        let (stats, layout) = (&*port.stats, &port.layout);
        let mut n = 0;
        // The applet time this round has spent on this endpoint.
        let mut spent = Duration::ZERO;
        // Whether the last descriptor ran `doTx` (its frames are in the
        // outbox).
        let mut made = false;
        while n < TX_BUDGET {
            let Some(d) = next_descriptor(&mut tx.tx, n == 0, stats) else {
                break;
            };
            if !port.has_applet.load(Ordering::Acquire) {
                // Removed since: the rest of the pass as without one.
                return self.take_tx_rest(tx, port, theirs, n, spent);
            }
            self.pump_made(port, tx, &mut made);
            n += 1;
            bump(&stats.tx_descriptors);
            let Framer {
                channels,
                max_message,
                ..
            } = &tx.framer;
            let mut done = false;
            let status = match channels.get(usize::from(d.chan)) {
                Some(Some(ch)) if d.len <= *max_message && layout.in_area(d.offset, d.len) => {
                    if ch.closed() {
                        bump(&stats.tx_closed);
                        TxStatus::Closed
                    } else {
                        let (status, took) = applet_tx(self, tx, port, d, theirs);
                        made = true;
                        // As in `take_tx`: the time summed only where it
                        // is checked; the rest of the pass waits for a
                        // later round once it is spent, or the applet
                        // overran.
                        done = theirs
                            && ({
                                spent += took;
                                spent > port.budgets.round_time
                            } || port.throttle_until.load(Ordering::Relaxed) != 0);
                        status
                    }
                }
                _ => {
                    bump(&stats.tx_rejected);
                    TxStatus::Rejected
                }
            };
            tx.tx.write_front(TxDesc {
                status: status as u16,
                ..d
            });
            // Taken, not yet completed: [`Engine::service`] publishes the
            // consumer index after the frames are delivered.
            tx.tx.take();
            if done {
                break;
            }
        }
        n
    }

    /// In a transmit pass, before the next descriptor: the frames the last
    /// `doTx` made (`made`, cleared here), if all are for endpoints of this
    /// engine, delivered now rather than at the pass's end (see
    /// [`Engine::take_tx`]); frames for another engine wait for the end.
    #[inline(always)]
    fn pump_made(&self, port: &Port, tx: &mut TxSide, made: &mut bool) {
        if std::mem::take(made) && !tx.framer.out.is_empty() && self.all_local(&tx.framer.out) {
            let TxSide { framer, next, .. } = tx;
            self.pump_applet(port, framer, next);
        }
    }

    /// [`Engine::take_tx`] for the rest of a pass whose applet was removed
    /// during it ([`Engine::take_tx_applet`]): rare, and out of line, so
    /// that `take_tx` stays inlined into [`Engine::service`] alone.
    #[cold]
    #[inline(never)]
    fn take_tx_rest(
        &self,
        tx: &mut TxSide,
        port: &Port,
        theirs: bool,
        taken: usize,
        spent: Duration,
    ) -> usize {
        self.take_tx(tx, port, Some(theirs), taken, spent)
    }

    /// [`Framer::transmit_built`] of a checked descriptor `d` of `port`,
    /// with the transport `lent` (locked here if not yet): the status of
    /// its frame, or `None` where it does not apply (the caller then
    /// delivers it directly or makes its frame in the outbox). Only while
    /// the outbox is empty, so that a frame built in the transport's
    /// memory never overtakes one made earlier in this pass.
    #[inline]
    fn transmit_built<'a>(
        &'a self,
        tx: &mut TxSide,
        port: &Port,
        d: TxDesc,
        lent: &mut Option<MutexGuard<'a, Box<dyn Transport>>>,
    ) -> Option<TxStatus> {
        if !self.inner.lends || !tx.framer.out.is_empty() {
            return None;
        }
        // Not for a channel to this engine: no lock taken for it.
        match tx.framer.channels.get(usize::from(d.chan)) {
            Some(Some(ch)) if !ch.local() => {}
            _ => return None,
        }
        let t = lent.get_or_insert_with(|| lock(&self.inner.transport));
        let at = port.layout.area + d.offset as usize;
        let r = tx
            .framer
            .transmit_built(&mut ***t, &port.seg, at, d.chan, d.len)?;
        let s = &self.inner.stats;
        Some(match r {
            Ok(()) => {
                s.frames_out.fetch_add(1, Ordering::Relaxed);
                TxStatus::Sent
            }
            Err(BuiltError::Refused) => {
                s.send_errors.fetch_add(1, Ordering::Relaxed);
                TxStatus::Sent
            }
            Err(BuiltError::Copy) => TxStatus::Dropped,
        })
    }

    /// Sends what the pass built in the transport's memory, and lets the
    /// transport go; always `true` (so that it can precede a step in a
    /// condition).
    #[inline]
    fn flush_lent(&self, lent: &mut Option<MutexGuard<'_, Box<dyn Transport>>>) -> bool {
        if lent.is_some() {
            Self::flush_lent_now(lent);
        }
        true
    }

    /// [`Engine::flush_lent`] with the transport held: out of line, so that
    /// a pass that built nothing in the transport's memory (every pass on a
    /// transport that lends none) carries no flush nor unlock in its code.
    #[cold]
    #[inline(never)]
    fn flush_lent_now(lent: &mut Option<MutexGuard<'_, Box<dyn Transport>>>) {
        if let Some(mut t) = lent.take() {
            // On an error the frames stay queued for the transport's next
            // flush, send or receive poll.
            let _ = t.flush();
        }
    }

    /// Delivers the message of a checked descriptor `d` of `port` without
    /// building its frame, if it goes to an endpoint of this engine; whether
    /// it did (if not, nothing was done or counted, and the caller makes
    /// the frame).
    ///
    /// This is the delivery [`Engine::deliver`] would make of the frame,
    /// step by step: the filter table's verdict on the frame, the
    /// endpoint it names, the generation check, the receive side's checks,
    /// the applet's `doRx` or the standard receive, with every outcome
    /// counted the same way. What it saves is the frame: the verdict is the
    /// one the channel's cache holds for the table's current version
    /// ([`Inner::verdicts`]: while no installed filter loads a byte that
    /// differs between two messages of a channel, the table's verdict on
    /// the channel's header is its verdict on each of its frames), and the
    /// message is copied once, straight from the sender's buffer area into
    /// the receive descriptor or buffers, or into the applet's `RxBuf`, or
    /// into its inbox (no filter reads it, so no private copy of it need
    /// be classified).
    ///
    /// It declines (and the frame is built and pumped as before) for a
    /// channel to another engine, a checksummed or closed channel, while
    /// some filter reads per-message bytes, and once this service's
    /// outbox holds a frame: a channel's messages then all go through the
    /// outbox, in order, and the frames an applet's `doRx` makes here join
    /// that outbox, behind which the next messages wait.
    ///
    /// `ch` is the descriptor's channel (open), `out` the transmit side's
    /// outbox. Always inlined: [`Engine::take_tx`] has a second, cold copy
    /// (`take_tx_rest`), and with two callers it was called, 28
    /// instructions more a message on the framed path.
    #[inline(always)]
    fn deliver_direct(&self, out: &mut Outbox, ch: &mut Channel, port: &Port, d: TxDesc) -> bool {
        if !out.is_empty() || !ch.goes_kept() {
            return false;
        }
        let version = self.inner.verdicts.load(Ordering::Acquire);
        if version == 0 {
            return false;
        }
        let payload = Payload {
            app: false,
            head: &[],
            tail: Some(Rest {
                seg: &port.seg,
                at: port.layout.area + d.offset as usize,
                len: d.len as usize,
            }),
        };
        self.keep(ch, version, d.len as usize);
        self.deliver_kept::<false>(port, &ch.verdict, &ch.template, true, &payload, out);
        true
    }

    /// Sends `msg` on `port`'s channel `chan` without a transmit
    /// descriptor, for an application whose engine runs on its own thread
    /// ([`crate::Endpoint::send`] in this process); whether it did. If
    /// not, nothing was done or counted, and the caller pushes a
    /// descriptor as before, which the engine then takes, checks and
    /// completes in the usual way.
    ///
    /// A descriptor the caller's own code builds from its own arguments
    /// needs no trip through shared memory to be trusted: the engine is in
    /// the caller's process and this is its code. So the message is
    /// handed over as its channel, its length and its bytes, and gets the
    /// checks [`Engine::take_tx`] makes of a descriptor's fields and the
    /// delivery [`Engine::deliver_direct`] makes of it, in the same order
    /// and counted on the same counters (`tx_descriptors` and
    /// `tx_frames` as for a descriptor taken and delivered without a
    /// frame): the channel open and this endpoint's, the length within
    /// the largest message, bytes in the buffer area within it, then the
    /// receiver's generation, closed flag, inbox and receive queue or
    /// buffers, each outcome counted as it is for a descriptor. What it
    /// saves: the descriptor's write, publication, read back, status and
    /// completion, and the transmit region (the bytes are copied straight
    /// from the caller's into the receive slot or buffers).
    ///
    /// It declines, before doing anything, whenever the outcome would not
    /// be a delivery without a frame, so that every other outcome (a
    /// rejected or closed channel, a frame, an applet) keeps its
    /// descriptor and the status the application reads with
    /// [`crate::Endpoint::tx_status`]: for an endpoint with an applet
    /// (`doTx` sees every message), while another thread holds the
    /// transmit side, while the transmit queue holds a descriptor (it
    /// goes first: a channel's messages arrive in the order sent), and
    /// wherever [`Engine::deliver_direct`] declines.
    #[inline(always)]
    pub(crate) fn send_direct(&self, port: &Port, chan: u16, msg: Direct<'_>) -> bool {
        // The declines that need no lock first, in the caller: a message
        // that then goes through the queue costs little more than before.
        let version = self.inner.verdicts.load(Ordering::Acquire);
        if version == 0 || port.has_applet.load(Ordering::Acquire) {
            return false;
        }
        self.send_direct_locked(port, chan, msg, version)
    }

    /// [`Engine::send_direct`] of the `len` bytes at `offset` of `port`'s
    /// buffer area, for [`crate::Endpoint::send_with`], which wrote them
    /// there; on an endpoint with an applet, [`Engine::send_applet_direct`]
    /// of them instead, as [`crate::Endpoint::send`] hands its copy over
    /// (out of line: the path without applet is `send_direct`'s, with one
    /// more load and test of the flag). Whether the message was taken; if
    /// not, nothing was done or counted.
    #[inline(always)]
    pub(crate) fn send_area_direct(&self, port: &Port, chan: u16, offset: u32, len: u32) -> bool {
        if port.has_applet.load(Ordering::Acquire) {
            return self.send_area_applet(port, chan, offset, len);
        }
        self.send_direct(port, chan, Direct::Area { offset, len })
    }

    /// [`Engine::send_area_direct`] on an endpoint with an applet.
    #[inline(never)]
    fn send_area_applet(&self, port: &Port, chan: u16, offset: u32, len: u32) -> bool {
        self.send_applet_direct(port, chan, offset, len).is_some()
    }

    /// [`Engine::send_direct`] once the table's verdicts are kept
    /// (`version`) and the endpoint has no applet.
    ///
    /// Always inlined, into [`Engine::send_direct_or_applet`] (so into
    /// [`crate::Endpoint::send`] and `send_with`'s short messages, in the
    /// caller's body) and [`Engine::send_direct`]. Until 2026-12-02 it was
    /// a call of its own: its frame (six saved registers) and the call were
    /// 21 instructions a message, the path's largest single item
    /// (`unet-count` path-40 354.0 -> 334.0, path-57 493.1 -> 472.1,
    /// path-1000 763.1 -> 743.1, path-4096 1379.1 -> 1359.1). The cost is
    /// code: this body is compiled into each caller of `Endpoint::send`.
    #[inline(always)]
    fn send_direct_locked(&self, port: &Port, chan: u16, msg: Direct<'_>, version: u64) -> bool {
        let Some(mut tx) = port.tx.try_lock() else {
            return false;
        };
        // Nothing queued before it (a corrupt index too is left to the
        // queue's own pass, which counts it).
        if !matches!(tx.tx.available(), Ok(0)) {
            return false;
        }
        let TxSide { framer, next, .. } = &mut *tx;
        let layout = &port.layout;
        let Framer {
            channels,
            out,
            max_message,
            ..
        } = framer;
        let payload = match msg {
            Direct::Bytes(b) => Payload::of_app(b),
            Direct::Area { offset, len } => {
                if !layout.in_area(offset, len) {
                    return false;
                }
                Payload {
                    app: false,
                    head: &[],
                    tail: Some(Rest {
                        seg: &port.seg,
                        at: layout.area + offset as usize,
                        len: len as usize,
                    }),
                }
            }
        };
        let len = payload.len();
        let Some(Some(ch)) = channels.get_mut(usize::from(chan)) else {
            return false;
        };
        if len > *max_message as usize || !out.is_empty() || !ch.goes_kept() {
            return false;
        }
        // A message for the descriptor's inline bytes, to a peer on this
        // engine: the line of the receive slot it goes to asked for now,
        // before the rest of its checks and the receive side's lock, so
        // that the stores that write and seal the slot need not wait for
        // the receiver's polls to let go of it (`Port::ask_for_rx_slot`,
        // 17 instructions). U-Net's round trip between two threads at 0
        // and 56 B fell by 7% (`loop_rtt`, eight alternated runs: 1.12x and
        // 1.09x the ring's before, 1.03x and 1.01x after). Not for a longer
        // message: asked for before its buffer's stores, the slot made a
        // 57-byte round trip slower, 0.40-0.42 µs against 0.44-0.48, as
        // the inbox's tag line alone did the lent applet's
        // (docs/benchmarks.md, "A short message's receive slot asked for
        // before its checks").
        if len <= INLINE_MAX
            && let Some(dst) = &ch.verdict.peer
        {
            dst.ask_for_rx_slot();
        }
        bump(&port.stats.tx_descriptors);
        self.keep(ch, version, len);
        // The receiving side's work inlined here (`INLINE`): a message
        // sent by its application's own call is the one path where the
        // frames of two calls (this one's and `deliver_local`'s, each
        // saving six registers and passing the payload through memory)
        // were a tenth of the whole path's instructions.
        self.deliver_kept::<true>(port, &ch.verdict, &ch.template, true, &payload, out);
        // As [`Engine::service`] does after a pass: the frames the
        // delivery made (an applet's `doRx` on this thread), delivered
        // with the transmit side still locked.
        if !out.is_empty() {
            self.pump_direct(port, framer, next);
        }
        true
    }

    /// The raw locks of `port`'s transmit and receive sides, for tests
    /// that check which path their takings use (biased or not).
    #[cfg(test)]
    pub(crate) fn side_locks(port: &Port) -> [&crate::biased::RawBiased; 2] {
        [port.tx.raw(), port.rx.raw()]
    }

    /// [`Engine::send_direct`] of `msg`, for [`crate::Endpoint::send`],
    /// which also learns why it declined if the endpoint has an applet
    /// (it then offers the message to a lent `doTx` where it is,
    /// [`Engine::send_applet_bytes`], or copies it into the buffer area for
    /// [`Engine::send_applet_direct`]): the applet flag read once, first,
    /// for both, so that a message without an applet that goes through the
    /// queue (a checksummed channel, or a frame) reads it no more often
    /// than before.
    #[inline(always)]
    pub(crate) fn send_direct_or_applet(&self, port: &Port, chan: u16, msg: &[u8]) -> Handed {
        let version = self.inner.verdicts.load(Ordering::Acquire);
        if port.has_applet.load(Ordering::Acquire) {
            // Read again under the transmit lock (`CallerMsg::takes`).
            if port.lends_tx.load(Ordering::Relaxed) {
                Handed::ToLentApplet
            } else {
                Handed::ToApplet
            }
        } else if version != 0 && self.send_direct_locked(port, chan, Direct::Bytes(msg), version) {
            Handed::Sent
        } else {
            Handed::Declined
        }
    }

    /// Hands the message at `offset` (`len` bytes) of `port`'s buffer area,
    /// on channel `chan`, to the endpoint's applet's `doTx` without a
    /// transmit descriptor, for the application's own thread
    /// ([`crate::Endpoint::send`] with the engine in this process): the
    /// status the descriptor would have completed with, or `None` if it
    /// declined, with nothing done or counted (the caller then pushes the
    /// descriptor, which [`Engine::service`] takes as before).
    ///
    /// As [`Engine::send_direct`] does for an endpoint without an applet:
    /// the descriptor is the caller's own code's, built from its own
    /// arguments, so it needs no trip through shared memory. The message
    /// gets what [`Engine::take_tx_applet`] does to a descriptor, in the
    /// same order, with the same counts: the transmit side held, the
    /// applet still installed, `tx_descriptors` counted, then
    /// [`applet_tx`] (the invocation with its fuel, word and time budgets,
    /// the throttle an overrun sets, the trap policy), then the frames it
    /// made delivered as [`Engine::service`] delivers them after a pass.
    /// The thread claims the endpoint first, as `Embedded::drive_tx` does
    /// before it services the queue: it is then the endpoint's own thread,
    /// on which [`Engine::service`] applies neither the round's time
    /// budget nor the throttle stop (those bound a thread shared by every
    /// endpoint, which never comes here).
    ///
    /// It declines, before doing anything, wherever the outcome would not
    /// be an invocation of `doTx`, so that a malformed or closed-channel
    /// message keeps its descriptor and the status
    /// [`crate::Endpoint::tx_status`] reads (`Rejected`, `Closed`): the
    /// channel not open, the length above the largest message, bytes
    /// outside the buffer area, a closed channel; and also while another
    /// thread holds the transmit side, while the transmit queue holds a
    /// descriptor (it goes first: a channel's messages arrive in the order
    /// sent), and once the applet is removed. What it saves: the
    /// descriptor's write, publication, read back, status and completion.
    ///
    /// Always inlined into [`crate::Endpoint::send_applet`] (its one
    /// caller outside tests), itself out of line, so that the message's
    /// copy into the buffer area, this and the invocation
    /// ([`applet_tx_inlined`]) share one frame.
    #[inline(always)]
    pub(crate) fn send_applet_direct(
        &self,
        port: &Port,
        chan: u16,
        offset: u32,
        len: u32,
    ) -> Option<TxStatus> {
        let d = TxDesc {
            len,
            offset,
            chan,
            ..TxDesc::default()
        };
        self.send_applet_msg(port, d)
    }

    /// [`Engine::send_applet_direct`] of a message in the caller's own
    /// memory, `msg` ([`crate::Endpoint::send`]), for an applet whose
    /// `doTx` is lent: `doTx` is lent `msg` where it lies, and the message
    /// it defers is sent from there ([`CallerMsg`]), without the copy into
    /// the transmit region that [`Engine::send_applet_direct`] reads. It
    /// declines, as that one does, and also for a copied `doTx` and for
    /// bytes in the endpoint's own segment, which its natives write (the
    /// caller then copies the message into the area and offers it there).
    #[inline(always)]
    pub(crate) fn send_applet_bytes(&self, port: &Port, chan: u16, msg: &[u8]) -> Option<TxStatus> {
        self.send_applet_msg(port, CallerMsg { chan, bytes: msg })
    }

    /// The body of [`Engine::send_applet_direct`] and
    /// [`Engine::send_applet_bytes`], for the message `msg`.
    #[inline(always)]
    fn send_applet_msg<M: TxMsg>(&self, port: &Port, msg: M) -> Option<TxStatus> {
        // The thread's token read once, for the three locks, the claim and
        // the owners' tests of the whole path.
        let me = Me::current();
        port.claim_as(me);
        let mut tx = port.tx.try_lock_as(me)?;
        if !port.has_applet.load(Ordering::Acquire) {
            return None;
        }
        // Nothing queued before it (a corrupt index too is left to the
        // queue's own pass, which counts it).
        if !tx.tx.is_empty_now() {
            return None;
        }
        let Framer {
            channels,
            max_message,
            ..
        } = &tx.framer;
        match channels.get(usize::from(msg.chan())) {
            Some(Some(ch)) if msg.len() <= *max_message && msg.takes(port) && !ch.closed() => {}
            _ => return None,
        }
        bump(&port.stats.tx_descriptors);
        // The owner's thread: untimed, as `service` invokes it there.
        let (status, _) = applet_tx_inlined(self, &mut tx, port, msg, false, me);
        // As [`Engine::service`] does after a pass: the frames `doTx`
        // made, delivered with the transmit side still locked, before the
        // caller reuses the message's bytes.
        let TxSide { framer, next, .. } = &mut *tx;
        if !framer.out.is_empty() {
            self.pump_applet(port, framer, next);
        }
        Some(status)
    }

    /// Whether a `doTx` for a message on `chan` should defer its tail
    /// `txPush` ([`Io::defer`]): while the engine keeps verdicts and
    /// `chan`'s kept verdict names its peer ([`Channel::direct`]), served
    /// by this thread (where [`Engine::deliver_deferred`] may take the
    /// message into its `RxBuf`) or with an applet (another thread's,
    /// where [`Engine::enqueue_deferred`] puts it in its inbox). A guess,
    /// not a check (the applet may push on another channel, the verdict
    /// may be stale, the peer's owner may change, and every case is
    /// checked again at the end): a message deferred only to become a
    /// frame after all ([`Framer::push_checked`]) costs more than the
    /// frame made at once, so that the messages that cannot go straight
    /// on (to another engine, to a peer of another thread without an
    /// applet, or while a filter that reads more than the header leaves
    /// verdicts unkept) are not deferred. A peer of another thread was
    /// burst-25's loss before its inbox was reached: deferred there only
    /// to be framed, the standard applet ran at 30.9-31.8% of plain U-Net
    /// against 33.7-35.0% without deferring (three alternated runs,
    /// 2026-11-30). The engine's test first: with verdicts unkept, every
    /// message is framed, and that `doTx` pays one load.
    ///
    /// Where the guess is another thread's applet, whose inbox the message
    /// of `len` bytes would go into, the lines its push will write are
    /// asked for now, before `doTx` runs
    /// ([`inbox::Inbox::ask_for_push_lines`]): taken from the consumer's
    /// core meanwhile, they are here when the push stores the tag.
    #[inline(always)]
    pub(super) fn may_defer(&self, tx: &TxSide, chan: u16, len: u32, me: Me) -> bool {
        self.inner.verdicts.load(Ordering::Relaxed) != 0
            && matches!(tx.framer.channels.get(usize::from(chan)),
            Some(Some(ch)) if ch.direct()
                && ch.verdict.peer.as_deref().is_some_and(|dst| {
                    dst.owner.load(Ordering::Relaxed) == me.token()
                        || (dst.has_applet.load(Ordering::Relaxed) && {
                            dst.inbox.ask_for_push_lines(len as usize);
                            true
                        })
                }))
    }

    /// Sends the message a `doTx` of `port` deferred at a tail site
    /// (`m`, [`Io::transmit_tail`]), with `port`'s applet (`rx`) still
    /// held: checked and counted already (`tx_frames`), it goes straight
    /// from the pushed array (`TxBuf` in the standard applet) into the
    /// receiver's `RxBuf` where [`Engine::deliver_deferred`] can take it,
    /// one copy instead of three; otherwise it becomes the frame `txPush`
    /// would have made, in the receive side's outbox lent to `doTx`, and
    /// goes on as that frame does.
    ///
    /// `false` if the message's bytes are gone (the array freed or
    /// shorter), which the tail site's proof excludes ([`deferred_bytes`]):
    /// the message is not sent, and [`applet_tx`] completes the descriptor
    /// as one the applet dropped (`Dropped`, counted in `applet_drops`), as
    /// a check that failed; never a panic on an applet's bytecode.
    ///
    /// Always inlined into [`applet_tx`], as it was before the inbox's way
    /// joined it (out of line, `standard-40` counted 21 more), with
    /// [`Engine::deliver_deferred`] inlined into it (out of line, its call
    /// and frame were 26 more a message in `standard-40`; this one out of
    /// line with that one inlined, 31 more, though `standard-40-framed`,
    /// which never defers, counted 8 fewer).
    ///
    /// `src`: where `m`'s bytes are ([`Src`]: the applet's heap, or for a
    /// lent `doTx`'s message `port`'s area or the sender's bytes,
    /// [`TxMsg::resolve_lent`]), a constant at each call.
    #[inline(always)]
    pub(super) fn resolve_deferred(
        &self,
        tx: &mut TxSide,
        rx: &mut RxSide,
        port: &Port,
        m: Deferred,
        src: Src<'_>,
        me: Me,
    ) -> bool {
        if rx.io.framer.out.is_empty() && self.deliver_deferred(tx, rx, port, &m, src, me) {
            return true;
        }
        let RxSide { io, applet, .. } = rx;
        match deferred_bytes(applet.as_ref(), port, &m, src) {
            Some(p) => {
                io.framer.push_checked(m.chan, p);
                true
            }
            None => false,
        }
    }

    /// [`Engine::resolve_deferred`]'s direct delivery: `true` if it
    /// delivered `m` (or put it in its receiver's inbox,
    /// [`Engine::enqueue_deferred`]), `false` (having counted nothing and
    /// changed nothing but the channel's cached verdict, refreshed as the
    /// frame's delivery would refresh it) where the frame `doTx` would have
    /// made does not reach its receiver's `doRx` at once in
    /// [`Engine::pump_sent`] (through [`Engine::deliver_kept`]
    /// and [`Engine::deliver_local`]), nor its inbox with nothing before
    /// it, so that the frame goes there and
    /// meets the same checks and counts: no verdicts kept (version 0), a
    /// channel not local, checksummed or closed, no owner or no kept peer
    /// (counted there as unmatched, or looked up), a peer without an
    /// applet, one whose frame would wait in its inbox
    /// ([`Port::waits_in_inbox`]) behind frames made before it (`tx.next`
    /// not empty), a peer that is `port` itself whose frame would not wait
    /// in its inbox (its applet is held here; one that would, as when a
    /// shared engine thread runs `doTx` for an endpoint another thread
    /// owns, goes into the inbox like any peer's), busy (its receive
    /// lock), closed, with frames waiting in its inbox, or its applet just
    /// removed.
    /// Otherwise what `deliver_local` does for the frame: into the inbox
    /// where the frame would wait there (with the tests made once for
    /// both ways), else `doRx` with `RxBuf` filled from `TxBuf`, its
    /// frames into `tx.next`, the receive queue published. Always inlined
    /// into [`Engine::resolve_deferred`].
    #[inline(always)]
    fn deliver_deferred(
        &self,
        tx: &mut TxSide,
        rx: &RxSide,
        port: &Port,
        m: &Deferred,
        src: Src<'_>,
        me: Me,
    ) -> bool {
        // The message's fields kept in memory and read there where a way
        // below uses them, not held in registers across its locks: with
        // the inbox's way inlined ([`Engine::enqueue_deferred`]) LLVM held
        // them, and spilled the locks' state instead, 5 more a message on
        // the same-thread lent delivery (`unet-count` standard-lent-40).
        // As when that way was a call, which took `m` by reference.
        let m = core::hint::black_box(m);
        let TxSide { framer, next, .. } = tx;
        let Some(Some(ch)) = framer.channels.get_mut(usize::from(m.chan)) else {
            return false;
        };
        let version = self.inner.verdicts.load(Ordering::Acquire);
        if version == 0 {
            // Verdicts no longer kept: no more guesses on this channel
            // until a verdict is taken again.
            ch.set_direct(false);
            return false;
        }
        if !ch.goes_kept() {
            return false;
        }
        self.keep(ch, version, m.len as usize);
        let (Some(owner), Some(dst)) = (ch.verdict.owner, ch.verdict.peer.as_deref()) else {
            return false;
        };
        if !dst.has_applet.load(Ordering::Acquire) {
            return false;
        }
        // [`Port::waits_in_inbox`]'s test, the flag read just above: the
        // frame would wait in the peer's inbox, and the message goes there
        // now, with nothing made before it (`next` empty, so that nothing
        // made earlier is overtaken).
        if dst.applet_elsewhere_as(next, me) {
            return next.is_empty() && self.enqueue_deferred(rx, port, dst, owner, m, src, me);
        }
        if core::ptr::eq(dst, port) {
            return false;
        }
        let Some(mut drx) = dst.rx.try_lock_inline_as(me) else {
            return false;
        };
        if dst.closed.load(Ordering::Acquire) || !dst.inbox.is_empty() || drx.applet.is_none() {
            return false;
        }
        let Some(bytes) = deferred_bytes(rx.applet.as_ref(), port, m, src) else {
            return false;
        };
        // A lent `doTx`'s message in `port`'s area is not the application's
        // bytes `Payload::app` means (which may lie in any segment, the
        // receiver's own among them), since `dst` is not `port` (tested
        // above) and every endpoint has a segment of its own, so that the
        // lent `doRx` may lend them in place without looking (7
        // instructions a message). One in the sending application's own
        // memory is such bytes: it may be a message the application holds
        // in `dst`'s buffers.
        let payload = Payload {
            app: matches!(src, Src::Caller(_)),
            head: bytemuck::cast_slice(bytes),
            tail: None,
        };
        receive_payload::<false>(dst, &mut drx, owner as u16, payload, next, false);
        drx.io.publish();
        true
    }

    /// [`Engine::deliver_deferred`]'s way into an inbox: the frame `doTx`
    /// would have made goes to its receiver's inbox in [`Engine::pump_sent`]
    /// (through [`Engine::deliver_kept`] and [`Engine::deliver_local`] to
    /// [`enqueue_message`]), which `deliver_deferred` has found with the
    /// frame's own tests (verdicts kept, the channel local, open and
    /// unchecksummed, a kept owner and peer, and [`Port::waits_in_inbox`]:
    /// the peer has an applet that another thread serves, or this thread's
    /// frames are past its inbox budget), and with nothing made before it
    /// (`tx.next` empty). The message then goes into the peer's (`dst`'s)
    /// inbox on `owner` at once, alone ([`inbox::Inbox::push_message`]: no
    /// frame header, which nothing at the drain reads), instead of through
    /// the outbox and the pump, copied once from the pushed array. Counted
    /// as that delivery counts, in [`open_inbox`] and [`count_refused`]:
    /// nothing where it enters, the engine's `closed` for a closed peer,
    /// the peer's `rx_queue_full` for an inbox at its budget.
    ///
    /// `false`, having counted nothing, only where the message's bytes are
    /// gone ([`Engine::resolve_deferred`] then finds them gone too and
    /// counts the drop). The bytes are found here, with the eight
    /// arguments that takes: found by `deliver_deferred` and passed in
    /// instead, the same instructions ran, and burst-25's lent applet moved
    /// some 10% fewer bytes a second (`fastpath bench unet --only burst`,
    /// eight alternated runs each, 2026-12-04: 10.9 against 12.0 GB/s).
    ///
    /// Until 2026-12-01 it made the tests itself again, after
    /// `deliver_deferred` had made them and declined (the channel's look-up,
    /// the version, the verdict, the peer's flag, and the thread's token
    /// read from its thread-local): 229 instructions a 40-byte message with
    /// the inbox's push, on the demo's two threads (`xthr_count`, `WITH=1`,
    /// bursts of 1). Then out of line, so that the same-thread delivery's
    /// path made no call (not cold: cold, LLVM kept its callees out of
    /// line, 1 more a message on the two-thread send). Inlined since, with
    /// `deliver_deferred`'s `m` kept in memory (see there): the call, its
    /// frame and its arguments (the message stored for a reference) were
    /// 31 instructions of the lent form's send on two threads
    /// (`xthr_count` `LENT=1` at 40 bytes, 693 -> 662 a message).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn enqueue_deferred(
        &self,
        rx: &RxSide,
        port: &Port,
        dst: &Port,
        owner: u32,
        m: &Deferred,
        src: Src<'_>,
        me: Me,
    ) -> bool {
        let Some(bytes) = deferred_bytes(rx.applet.as_ref(), port, m, src) else {
            return false;
        };
        // The message alone: the verdict is taken, and the receiving
        // applet's `doRx` sees the payload alone either way.
        enqueue_bytes(
            dst,
            owner as u16,
            bytemuck::cast_slice(bytes),
            &self.inner.stats,
            me,
        );
        true
    }

    /// Pumps the frames in `tx.next` (a receiver's, made by a deferred
    /// message's direct delivery), with a spare outbox as the scratch one.
    #[cold]
    #[inline(never)]
    pub(super) fn pump_next(&self, tx: &mut TxSide) {
        let mut scratch = outbox();
        self.pump(&mut tx.next, &mut scratch);
        recycle(scratch);
    }

    /// Whether every frame of `out` is for an endpoint of this engine.
    #[inline]
    fn all_local(&self, out: &Outbox) -> bool {
        out.iter()
            .all(|(f, _)| frame::peek_dst(f) == Some(self.inner.local))
    }

    /// [`Engine::pump_sent`] of one `doTx`'s frames ([`Engine::take_tx`]),
    /// out of line: `pump_sent` stays inlined into [`Engine::service`] alone.
    #[inline(never)]
    fn pump_applet(&self, port: &Port, framer: &mut Framer, next: &mut Outbox) {
        self.pump_sent(port, framer, next);
    }

    /// [`Engine::pump_sent`] for [`Engine::send_direct`], out of line:
    /// `pump_sent` stays inlined into [`Engine::service`] alone.
    #[cold]
    #[inline(never)]
    fn pump_direct(&self, port: &Port, framer: &mut Framer, next: &mut Outbox) {
        self.pump_sent(port, framer, next);
    }

    /// Makes sure channel `ch` (to an endpoint of this engine, without a
    /// checksum, open) keeps its verdict under the table's `version` (not
    /// 0), taking it now if the one it holds is from an earlier version:
    /// classified as its frame would be, the channel's header with a
    /// `len`-byte message's lengths (no filter reads past the header, nor
    /// a byte that differs between two messages of a channel).
    #[inline]
    fn keep(&self, ch: &mut Channel, version: u64, len: usize) {
        if ch.verdict.version != version {
            self.take_verdict(ch, version, len);
        }
    }

    #[inline(never)]
    fn take_verdict(&self, ch: &mut Channel, version: u64, len: usize) {
        let mut hdr = ch.template;
        frame::patch_lengths(&mut hdr, len);
        let owner = self.classify(&hdr);
        // The peer's whole id, generation included, is in the header: its
        // port is kept if the verdict names it.
        let be16 = |at: usize| u16::from_be_bytes([hdr[at], hdr[at + 1]]);
        let peer = endpoint_id(be16(frame::UNET_DST_EP), be16(frame::UNET_DST_GEN));
        let peer = owner
            .filter(|o| (o >> 16) as u16 == endpoint_slot(peer))
            .and_then(|_| self.port(peer));
        ch.set_direct(ch.local() && !ch.checksum() && owner.is_some() && peer.is_some());
        ch.verdict = Kept {
            version,
            owner,
            peer,
        };
    }

    /// Delivers `port`'s message `payload` on a channel whose verdict is
    /// `kept` (see [`Engine::keep`]), without classifying it: the endpoint
    /// the verdict names, the generation check, then
    /// [`Engine::deliver_local`]. `hdr` is the message's frame header, or
    /// the channel's header (`template`): only the generation check below
    /// (a verdict without `kept.peer`) reads it. A message sent without a
    /// frame (`template`) is counted as sent here; a frame was counted when
    /// it was made. Frames an applet makes go to `made`.
    /// With `INLINE`, the delivery to a kept peer ([`Engine::deliver_local`]'s
    /// work) is inlined into the caller rather than called.
    #[inline(always)]
    fn deliver_kept<const INLINE: bool>(
        &self,
        port: &Port,
        kept: &Kept,
        hdr: &[u8; HEADER_LEN],
        template: bool,
        payload: &Payload<'_>,
        made: &mut Outbox,
    ) {
        let s = &self.inner.stats;
        if template {
            // Under the transmit lock: `tx_direct` is this side's alone.
            bump(&port.stats.tx_direct);
        }
        let Some(owner) = kept.owner else {
            bump_shared(&s.unmatched);
            return;
        };
        let chan = owner as u16;
        if let Some(dst) = &kept.peer {
            if INLINE {
                return self.deliver_local_inline(dst, chan, payload, made);
            }
            return self.deliver_local(dst, chan, payload, made);
        }
        self.inner.ports.with(|ports| {
            let slot = usize::from((owner >> 16) as u16);
            let Some(dst) = ports.get(slot).and_then(Option::as_ref) else {
                bump_shared(&s.unmatched);
                return;
            };
            // As in `deliver_to`: the table may be from before the slot
            // changed hands.
            let dst_gen =
                u16::from_be_bytes([hdr[frame::UNET_DST_GEN], hdr[frame::UNET_DST_GEN + 1]]);
            if dst_gen != endpoint_generation(dst.id) {
                bump_shared(&s.unmatched);
                return;
            }
            self.deliver_local(dst, chan, payload, made)
        })
    }

    /// The end of [`Engine::deliver_kept`] once the endpoint `dst` is found
    /// and its generation checked, as [`Engine::deliver_to`] ends for a
    /// frame: to the inbox (as the message alone, [`enqueue_message`]) if
    /// `dst`'s applet runs on another thread (or
    /// this thread's applets have made frames past the inbox budget, or
    /// frames wait there), else the receive side's checks and `doRx` or
    /// the standard receive of `payload` on `chan`, at once.
    ///
    /// Out of line, so that the receive lock and the inline descriptor's
    /// push are inlined into it (inlined into the service, the service's
    /// size made the compiler call both instead).
    #[inline(never)]
    fn deliver_local(&self, dst: &Port, chan: u16, payload: &Payload<'_>, made: &mut Outbox) {
        self.deliver_local_inline(dst, chan, payload, made)
    }

    /// [`Engine::deliver_local`]'s body, inlined into its callers:
    /// `deliver_local` itself, and [`Engine::send_direct_locked`].
    ///
    /// The payload comes by reference, and goes so to every callee on the
    /// way without applet (`push_rx_inline`, `deliver_one_buffer`,
    /// `deliver_default`, `enqueue_message`). Passed by value, the sender's
    /// payload, which `Payload::of_app` stores field by field, was copied
    /// for the call in 16-byte pieces: three loads a message that the
    /// store buffer cannot forward from those narrower stores
    /// (`stlf-scan ... unet-count path-40`: 5.00 a message, 2.01 after,
    /// the bench's own copy out in libc left), and 6 instructions.
    #[inline(always)]
    fn deliver_local_inline(
        &self,
        dst: &Port,
        chan: u16,
        payload: &Payload<'_>,
        made: &mut Outbox,
    ) {
        let s = &self.inner.stats;
        // A kept delivery: into the inbox as the message alone.
        if dst.waits_in_inbox(made) {
            return enqueue_message(dst, chan, payload, s);
        }
        let mut rx = dst.rx.lock();
        if dst.closed.load(Ordering::Acquire) {
            bump_shared(&s.closed);
            return;
        }
        // Frames still waiting for an applet removed since keep their
        // place: this message waits behind them.
        if !dst.inbox.is_empty() {
            drop(rx);
            return enqueue_message(dst, chan, payload, s);
        }
        if rx.applet.is_none() {
            // The standard receive, inline: most messages to an endpoint
            // of this engine take it. A message that fits the descriptor
            // (the short path) is written straight into its slot here, as
            // `deliver_default` writes it, without that call's frame.
            // A message in one buffer from its sender's memory (`send`,
            // `send_with` of at most 64 bytes), the next most common, as
            // `deliver_default` delivers it, inline too. One from the
            // sender's buffer area (`send_with`'s zero copy, a frame's
            // tail) takes the call: inlined, the `loop` round trip of
            // 1 KiB lost 0.02 µs (`loop_rtt`, four runs each, 0.256-0.267
            // µs against 0.238-0.245 with the call; the cause not found),
            // while a 57-byte one, from the caller's memory, keeps it.
            let len = payload.len();
            if len <= INLINE_MAX {
                if rx.io.push_rx_inline(chan, payload).is_err() {
                    bump(&rx.io.stats.rx_queue_full);
                }
            } else if len <= rx.io.layout.config.buffer_size as usize && payload.tail.is_none() {
                // Given as a payload without a tail, so that the tail's
                // test is not made again there (the payload is kept on
                // the stack, and its tail was read back from there).
                let head = Payload {
                    app: payload.app,
                    head: payload.head,
                    tail: None,
                };
                rx.io.deliver_one_buffer(chan, &head, len);
            } else {
                rx.io.deliver_default(chan, payload);
            }
        } else {
            receive_payload::<false>(dst, &mut rx, chan, *payload, made, false);
        }
        rx.io.publish();
    }
}

/// The next transmit descriptor of a pass of [`Engine::take_tx`] or
/// [`Engine::take_tx_applet`], `first` at the pass's first: the producer's
/// index is read once per pass, at its first descriptor, so that what the
/// application pushes meanwhile is taken by the next pass (the engine's
/// next poll, or the application's next send), which saves a read of the
/// shared index and its check per pass of one message. `None` at the end
/// of what was pushed, or for a corrupt index (counted).
#[inline(always)]
fn next_descriptor(
    tx: &mut Consumer<TxDesc, TxQueue>,
    first: bool,
    stats: &PortStats,
) -> Option<TxDesc> {
    let next = if first {
        tx.peek_fresh()
    } else {
        Ok(tx.peek_seen())
    };
    match next {
        Ok(d) => d,
        Err(_) => {
            bump_shared(&stats.queue_corrupt);
            None
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    //! [`Engine::send_direct`]'s own checks, which [`crate::Endpoint`]'s
    //! checks before it hide from the integration tests: each declines
    //! with nothing done or counted.
    use super::*;
    use crate::Endpoint;
    use crate::transport::LoopNet;

    /// An engine on a `loop` transport of its own, with the default
    /// budgets (also `applet_io`'s tests').
    pub(in crate::engine) fn engine() -> Engine {
        engine_with(Budgets::default())
    }

    /// [`engine`] with the given budgets.
    fn engine_with(budgets: Budgets) -> Engine {
        let net = LoopNet::new();
        Engine::with_budgets(
            Box::new(net.attach("10.0.0.1:7000".parse().unwrap()).unwrap()),
            budgets,
        )
    }

    /// Two endpoints of `e`, `a` with the applet `ca` and `b` with `cb`
    /// (`None`: without), and channels both ways: `a`'s to `b`, `b`'s to
    /// `a`.
    fn linked(e: &Engine, ca: Option<&[u8]>, cb: Option<&[u8]>) -> (Endpoint, Endpoint, u16, u16) {
        let mut a = e.create_endpoint(Config::default(), ca).unwrap();
        let mut b = e.create_endpoint(Config::default(), cb).unwrap();
        let ab = a.open_channel(e.local(), b.id()).unwrap();
        let ba = b.open_channel(e.local(), a.id()).unwrap();
        (a, b, ab, ba)
    }

    /// An endpoint `a` without an applet and an endpoint `b` with the
    /// standard applet, on one engine with `budgets`, with channels both
    /// ways (`a`'s to `b` returned), and `b`'s port claimed by another
    /// thread (as if `b`'s application ran there), so that what `a` sends
    /// from this thread waits in `b`'s inbox.
    fn applet_inbox_pair(budgets: Budgets) -> (Engine, Endpoint, Endpoint, u16, Arc<Port>) {
        let e = engine_with(budgets);
        let (a, b, ab, _) = linked(&e, None, Some(crate::applets::STANDARD));
        let port = e.port(b.id()).unwrap();
        std::thread::scope(|s| {
            s.spawn(|| port.claim());
        });
        (e, a, b, ab, port)
    }

    /// Sends nothing and counts nothing: the sender's and the engine's
    /// counters are as before.
    fn declines(e: &Engine, port: &Port, chan: u16, msg: Direct<'_>) {
        let (before, engine_before) = (port.counts(), e.counts());
        assert!(!e.send_direct(port, chan, msg));
        assert_eq!(port.counts(), before);
        assert_eq!(e.counts(), engine_before);
    }

    /// The transmit side's and the receive side's framers hold the same
    /// channels in the same state ([`Framer::channels`]), which
    /// [`Io::lend_tail`] relies on (it lends the channel a descriptor's
    /// checks found open and not closed on the transmit side without
    /// looking it up on the receive side): channels opened, and closed
    /// when their peer goes, change on both.
    #[test]
    fn both_framers_keep_the_same_channels() {
        let e = engine();
        let mut a = e.create_endpoint(Config::default(), None).unwrap();
        let mut peers: Vec<_> = (0..3)
            .map(|_| e.create_endpoint(Config::default(), None).unwrap())
            .collect();
        let tags: Vec<u16> = peers
            .iter()
            .map(|p| a.open_channel(e.local(), p.id()).unwrap())
            .collect();
        let port = e.port(a.id()).unwrap();
        // Each side's channels: `None` not open, else whether closed.
        let sides = |port: &Port| {
            let states = |c: &[Option<Channel>]| {
                c.iter()
                    .map(|c| c.as_ref().map(Channel::closed))
                    .collect::<Vec<_>>()
            };
            let tx = port.tx.lock();
            let rx = port.rx.lock();
            (states(&tx.framer.channels), states(&rx.io.framer.channels))
        };
        let (tx, rx) = sides(&port);
        assert_eq!(tx, rx, "opened");
        for &t in &tags {
            assert_eq!(tx[usize::from(t)], Some(false));
        }
        let gone = peers.remove(1);
        e.remove_port(gone.id()).unwrap();
        let (tx, rx) = sides(&port);
        assert_eq!(tx, rx, "one closed");
        assert_eq!(tx[usize::from(tags[1])], Some(true));
        assert_eq!(tx[usize::from(tags[0])], Some(false));
    }

    #[test]
    fn each_check_of_a_direct_send_declines_with_nothing_counted() {
        let e = engine();
        let (mut a, mut b, ab, _) = linked(&e, None, None);
        let port = e.port(a.id()).unwrap();
        assert!(e.send_direct(&port, ab, Direct::Bytes(b"first")));
        assert_eq!(b.recv().unwrap().to_vec(), b"first");
        assert_eq!(port.counts().tx_descriptors, 1);
        // A channel that is not open.
        declines(&e, &port, ab + 1, Direct::Bytes(b"x"));
        // Longer than the largest message.
        let max = Config::default().max_message() as usize;
        declines(&e, &port, ab, Direct::Bytes(&vec![0; max + 1]));
        // Bytes outside the buffer area.
        let area = a.layout().area_len as u32;
        declines(
            &e,
            &port,
            ab,
            Direct::Area {
                offset: area - 8,
                len: 16,
            },
        );
        // A descriptor waiting in the transmit queue goes first.
        a.set_drive(false);
        a.send(ab, b"queued").unwrap();
        declines(&e, &port, ab, Direct::Bytes(b"y"));
        assert!(e.service(&port) == 1);
        assert_eq!(b.recv().unwrap().to_vec(), b"queued");
        // The transmit side held by another thread.
        {
            let _held = port.tx.lock();
            declines(&e, &port, ab, Direct::Bytes(b"z"));
        }
        // The channel closed (the endpoint's own check not consulted).
        drop(b);
        declines(&e, &port, ab, Direct::Bytes(b"closed"));
    }

    #[test]
    fn an_endpoint_with_an_applet_never_sends_directly() {
        let e = engine();
        let applet = crate::applets::STANDARD;
        let mut a = e.create_endpoint(Config::default(), Some(applet)).unwrap();
        let b = e.create_endpoint(Config::default(), None).unwrap();
        let ab = a.open_channel(e.local(), b.id()).unwrap();
        let port = e.port(a.id()).unwrap();
        declines(&e, &port, ab, Direct::Bytes(b"to doTx"));
    }

    /// One message of [`run_stream`]: its channel (`None`: the open one),
    /// offset and length in the buffer area, and, for `Hostile`, the
    /// `mode`, `count` and `nul` its `doTx` runs with.
    #[derive(Debug, Clone, Copy)]
    struct Step {
        chan: Option<u16>,
        offset: u32,
        len: u32,
        mode: i32,
        count: i32,
        nul: i32,
    }

    /// A stream of 24 messages drawn from `seed` (a seeded generator, so
    /// that a failing stream can be run again from its seed).
    fn stream(seed: u64, area: u32, max: u32) -> Vec<Step> {
        use rand::{Rng, SeedableRng};
        let mut r = rand::rngs::StdRng::seed_from_u64(seed);
        (0..24)
            .map(|_| {
                let len = match r.random_range(0..10) {
                    0 => max + 1 + r.random_range(0..64u32),
                    1 => 0,
                    2 => max - r.random_range(0..4u32),
                    _ => 1 + r.random_range(0..300u32),
                };
                let offset = match r.random_range(0..10) {
                    0 => area - 8,
                    1 => u32::MAX - 4,
                    _ => r.random_range(0..area.saturating_sub(max).max(1)),
                };
                Step {
                    chan: (r.random_range(0..8) == 0).then_some(7),
                    offset,
                    len,
                    // 0 sends nothing, 2 runs out of fuel, 4 pushes `count`
                    // frames (a null array where `nul`: a trap).
                    mode: [0, 2, 4, 4, 4][r.random_range(0..5usize)],
                    count: r.random_range(0..3),
                    nul: i32::from(r.random_range(0..4) == 0),
                }
            })
            .collect()
    }

    /// What a run of a stream left: each message's status, what arrived,
    /// and the sender's, receiver's and engine's counters.
    type Outcome = (
        Vec<TxStatus>,
        Vec<Vec<u8>>,
        PortCounts,
        PortCounts,
        EngineCounts,
    );

    /// Runs `steps` through an endpoint with `applet` to one without: by
    /// [`Engine::send_applet_direct`] where it takes the message (falling
    /// back to a descriptor where it declines) if `direct`, else by
    /// descriptors alone. Also returns how many went without one.
    fn run_stream(applet: &[u8], steps: &[Step], direct: bool) -> (Outcome, usize) {
        let e = engine();
        let (mut a, mut b, ab, _) = linked(&e, Some(applet), None);
        let port = e.port(a.id()).unwrap();
        let area = a.layout().area_len as u32;
        let (mut statuses, mut got, mut without) = (Vec::new(), Vec::new(), 0);
        for (i, s) in steps.iter().enumerate() {
            let chan = s.chan.unwrap_or(ab);
            if u64::from(s.offset) + u64::from(s.len) <= u64::from(area) {
                let bytes: Vec<u8> = (0..s.len).map(|j| (i as u32 * 7 + j) as u8).collect();
                a.write_area(s.offset, &bytes).unwrap();
            }
            if applet == crate::applets::HOSTILE {
                e.with_applet(a.id(), |ap| {
                    for (name, v) in [
                        ("mode", s.mode),
                        ("chan", i32::from(ab)),
                        ("len", 1 + s.len.min(200) as i32),
                        ("off", (s.offset % 4096) as i32),
                        ("count", s.count),
                        ("nul", s.nul),
                    ] {
                        ap.set_static_int(name, v).unwrap();
                    }
                })
                .unwrap();
            }
            let d = TxDesc {
                len: s.len,
                offset: s.offset,
                chan,
                ..TxDesc::default()
            };
            let status = match direct
                .then(|| e.send_applet_direct(&port, chan, s.offset, s.len))
                .flatten()
            {
                Some(status) => {
                    without += 1;
                    status
                }
                None => {
                    let n = a.tx_pushed();
                    a.push_tx(d).unwrap();
                    assert!(a.flush(10));
                    a.tx_status(n)
                }
            };
            statuses.push(status);
            while let Some(m) = b.recv() {
                got.push(m.to_vec());
            }
        }
        let outcome = (statuses, got, a.counts(), b.counts(), e.counts());
        (outcome, without)
    }

    /// The differential test of [`Engine::send_applet_direct`]: over
    /// random streams of messages (channels not open, bytes outside the
    /// area, lengths over the largest message, and `doTx`s that send,
    /// send nothing, drop, trap and run out of fuel), the message path
    /// without a descriptor gives the same statuses, deliveries and
    /// counters as the descriptors do.
    #[test]
    fn an_applet_send_without_a_descriptor_matches_the_descriptor_path() {
        let (area, max) = {
            let e = engine();
            let a = e.create_endpoint(Config::default(), None).unwrap();
            (a.layout().area_len as u32, Config::default().max_message())
        };
        let applets = [
            crate::applets::STANDARD,
            crate::applets::HOSTILE,
            crate::applets::BREAKDOWN,
        ];
        let mut without = 0;
        let mut seen = std::collections::HashSet::new();
        for seed in 0..36u64 {
            let applet = applets[seed as usize % applets.len()];
            let steps = stream(seed * 0x9e37_79b9 + 17, area, max);
            let (by_desc, none) = run_stream(applet, &steps, false);
            assert_eq!(none, 0);
            let (direct, n) = run_stream(applet, &steps, true);
            assert_eq!(direct, by_desc, "seed {seed}");
            without += n;
            seen.extend(by_desc.0.iter().copied().map(|s| s as u16));
        }
        // Every outcome was met, and most messages went without one.
        for s in [TxStatus::Sent, TxStatus::Rejected, TxStatus::Dropped] {
            assert!(seen.contains(&(s as u16)), "{s:?} never met");
        }
        assert!(without > 36 * 24 / 2, "{without} without a descriptor");
    }

    /// A receiver's empty poll that finds nothing for the engine to do
    /// ([`Engine::rx_idle`]) returns without driving it, and still claims
    /// its endpoint for the polling thread, as a poll that drives it does
    /// ([`Engine::drive_rx`]): the owner of an endpoint without an applet
    /// decides whether a `doTx`'s message to it is deferred
    /// ([`Engine::may_defer`]). A frame that then waits for the transport
    /// is not idle: the next poll receives it.
    #[test]
    fn an_idle_receive_poll_claims_its_endpoint_and_a_waiting_frame_is_not_idle() {
        let net = LoopNet::new();
        let attach = |at: &str| Engine::new(Box::new(net.attach(at.parse().unwrap()).unwrap()));
        let (ea, eb) = (attach("10.0.0.1:7000"), attach("10.0.0.2:7000"));
        let mut a = ea.create_endpoint(Config::default(), None).unwrap();
        let mut b = eb.create_endpoint(Config::default(), None).unwrap();
        let ab = a.open_channel(eb.local(), b.id()).unwrap();
        b.open_channel(ea.local(), a.id()).unwrap();
        let port = eb.port(b.id()).unwrap();
        assert!(eb.rx_idle(&port), "nothing sent: idle");
        std::thread::scope(|s| {
            s.spawn(|| {
                assert!(b.recv_ref().is_none());
                assert!(port.is_owner(), "the idle poll claimed it");
            });
        });
        assert!(!port.is_owner());
        a.send(ab, b"over the transport").unwrap();
        assert!(!eb.rx_idle(&port), "a frame waits for the transport");
        assert!(port.is_owner(), "and the test claimed it");
        assert_eq!(b.recv_ref().unwrap().to_vec(), b"over the transport");
        assert!(eb.rx_idle(&port));
    }

    /// A receiver whose applet's inbox has run a frame asks, at each idle
    /// poll of a receive call, for the lines the next frame is expected in
    /// ([`inbox::Inbox::prefetch_next`]): two for a 57-byte message and its
    /// header, in the ring after the one that ran. Driving the engine does
    /// not ask.
    #[test]
    fn an_empty_poll_of_an_applets_endpoint_asks_for_its_inboxs_next_lines() {
        use super::inbox::PREFETCHED;
        let (_e, mut a, mut b, ab, port) = applet_inbox_pair(Budgets::default());
        a.send(ab, &[7; 57]).unwrap();
        assert!(!port.inbox.is_empty(), "the message waits in the inbox");
        PREFETCHED.with(|f| f.set(None));
        assert_eq!(b.recv_ref().unwrap().to_vec(), [7; 57]);
        assert!(port.inbox.is_empty());
        // The first empty poll gives the message's buffer back and drives
        // the engine (`Engine::drive_rx`), which does not ask; the next
        // ones only look (`Engine::rx_poll`), and each asks.
        PREFETCHED.with(|f| f.set(None));
        assert!(b.recv_ref().is_none());
        assert_eq!(PREFETCHED.with(|f| f.get()), None, "drive_rx asked");
        for poll in 1..3 {
            PREFETCHED.with(|f| f.set(None));
            assert!(b.recv_ref().is_none());
            let (at, lines) = PREFETCHED
                .with(|f| f.get())
                .unwrap_or_else(|| panic!("empty poll {poll} asked for nothing"));
            assert_eq!(lines, 2, "a 57-byte message and its 8-byte header");
            assert!(
                at < 2 * 64,
                "the line after the first message's start: {at}"
            );
        }
        // Nor does driving the engine between messages.
        PREFETCHED.with(|f| f.set(None));
        b.poll_engine();
        assert_eq!(PREFETCHED.with(|f| f.get()), None, "poll_engine asked");
    }

    /// Frames waiting in an applet's inbox, drained by the endpoint's own
    /// receive call and by a thread shared by every endpoint: the owner's
    /// call ([`Endpoint::recv_ref`]'s empty poll, [`RxPoll::Inbox`], the
    /// owner's drain [`Engine::drain_claimed`]) runs them all at once and
    /// returns the first message from the same call, even while the
    /// applet is throttled (its own time: neither the test at the drain's
    /// start nor the one after each frame applies); a shared thread's
    /// drain runs none while it is throttled.
    #[test]
    fn the_owners_receive_runs_its_inbox_at_once_and_a_shared_drain_keeps_its_bounds() {
        let (e, mut a, mut b, ab, port) = applet_inbox_pair(Budgets::default());
        for m in [&b"one"[..], b"two", b"three"] {
            a.send(ab, m).unwrap();
        }
        assert!(!port.inbox.is_empty(), "the messages wait in the inbox");
        port.throttle_until.store(u64::MAX, Ordering::Relaxed);
        // This thread is not the owner: a shared drain, and throttled.
        assert!(!port.is_owner());
        assert_eq!(e.drain(&port), 0);
        assert!(!port.inbox.is_empty());
        // b's receive call claims b and runs the three: the first comes
        // back from that call, the others are sealed behind it.
        assert_eq!(
            b.recv_ref().map(|m| m.to_vec()).as_deref(),
            Some(&b"one"[..])
        );
        assert!(port.inbox.is_empty(), "the owner's drain ran them all");
        assert_eq!(b.pending(), 2);
        assert_eq!(b.recv_ref().unwrap().to_vec(), b"two");
        assert_eq!(b.recv_ref().unwrap().to_vec(), b"three");
        let c = port.counts();
        assert_eq!(c.applet_drops + c.applet_traps + c.rx_queue_full, 0);
    }

    /// Frames in an applet's inbox behind a header that fails its check
    /// (memory corruption: the engine writes every header) are dropped,
    /// each counted in the endpoint's `queue_corrupt`, and the inbox's
    /// budget they held comes back: at a budget of three frames, the next
    /// three messages arrive.
    #[test]
    fn frames_behind_a_bad_inbox_header_are_counted_and_their_budget_comes_back() {
        let (_engine, mut a, mut b, ab, port) = applet_inbox_pair(Budgets {
            inbox_frames: 3,
            ..Budgets::default()
        });
        for m in [&b"one"[..], b"two", b"three", b"four"] {
            a.send(ab, m).unwrap();
        }
        assert_eq!(port.counts().rx_queue_full, 1, "the fourth: the budget");
        port.corrupt_inbox_next(&port.rx.lock());
        assert_eq!(b.recv_ref().map(|m| m.to_vec()), None);
        let c = port.counts();
        assert_eq!(c.queue_corrupt, 3, "each frame dropped counted");
        assert_eq!((c.rx_delivered, c.rx_queue_full), (0, 1));
        std::thread::scope(|s| {
            s.spawn(|| port.claim());
        });
        for m in [&b"five"[..], b"six", b"seven"] {
            a.send(ab, m).unwrap();
        }
        let got: Vec<_> = std::iter::from_fn(|| b.recv_ref().map(|m| m.to_vec())).collect();
        assert_eq!(got, [&b"five"[..], b"six", b"seven"]);
        let c = port.counts();
        assert_eq!(
            (c.queue_corrupt, c.rx_delivered, c.rx_queue_full),
            (3, 3, 1)
        );
    }

    /// The counters [`Engine::remove_port`] returns are read after it
    /// closed the inbox: frames its closing drops behind a header that
    /// failed its check are in them (the daemon's `EndpointClosed` event
    /// reports these), and frames that were waiting are the engine's
    /// `closed`.
    #[test]
    fn the_counters_a_removal_returns_hold_what_its_closing_counted() {
        let (e, mut a, b, ab, port) = applet_inbox_pair(Budgets::default());
        for m in [&b"one"[..], b"two", b"three"] {
            a.send(ab, m).unwrap();
        }
        // Nothing runs the inbox: its first frame's header fails, and
        // the closing drops the three behind it.
        port.corrupt_inbox_next(&port.rx.lock());
        assert_eq!(port.counts().queue_corrupt, 0);
        let closed_before = e.counts().closed;
        let c = e.remove_port(b.id()).unwrap();
        assert_eq!(c.queue_corrupt, 3, "{c:?}");
        assert_eq!(c.rx_delivered, 0);
        assert_eq!(e.counts().closed, closed_before);
        // Without the corruption the three wait and the closing counts
        // them as the engine's.
        let (e, mut a, b, ab, _port) = applet_inbox_pair(Budgets::default());
        for m in [&b"one"[..], b"two", b"three"] {
            a.send(ab, m).unwrap();
        }
        let c = e.remove_port(b.id()).unwrap();
        assert_eq!(c.queue_corrupt, 0);
        assert_eq!(e.counts().closed, 3);
    }

    /// The counters [`Engine::remove_port`] returns wait for a transmit
    /// pass that holds the port's transmit lock: what it counts under it
    /// is in them (the daemon's `EndpointClosed` event reports these).
    #[test]
    fn the_counters_a_removal_returns_wait_for_a_transmit_pass() {
        let e = engine();
        let a = e.create_endpoint(Config::default(), None).unwrap();
        let port = e.port(a.id()).unwrap();
        let (held, holding) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            let p = &port;
            s.spawn(move || {
                let tx = p.tx.lock();
                held.send(()).unwrap();
                std::thread::sleep(std::time::Duration::from_millis(100));
                // As a pass counts the descriptor it took.
                p.stats.tx_descriptors.fetch_add(1, Ordering::Relaxed);
                drop(tx);
            });
            holding.recv().unwrap();
            let c = e.remove_port(a.id()).unwrap();
            assert_eq!(c.tx_descriptors, 1, "{c:?}");
        });
    }

    /// [`Engine::send_applet_direct`]'s declines other than a malformed
    /// message's (which the test above meets): each with nothing done or
    /// counted.
    #[test]
    fn each_decline_of_an_applet_send_leaves_the_message_to_the_queue() {
        let e = engine();
        let mut a = e
            .create_endpoint(Config::default(), Some(crate::applets::STANDARD))
            .unwrap();
        let mut b = e.create_endpoint(Config::default(), None).unwrap();
        let ab = a.open_channel(e.local(), b.id()).unwrap();
        b.open_channel(e.local(), a.id()).unwrap();
        let port = e.port(a.id()).unwrap();
        a.write_area(0, b"first").unwrap();
        let declines = |e: &Engine, port: &Port| {
            let (before, engine_before) = (port.counts(), e.counts());
            assert_eq!(e.send_applet_direct(port, ab, 0, 5), None);
            assert_eq!(port.counts(), before);
            assert_eq!(e.counts(), engine_before);
        };
        // Another thread ran the application: the sending thread claims
        // the endpoint (as `drive_tx` does) before `doTx` runs untimed.
        std::thread::scope(|s| {
            s.spawn(|| port.claim());
        });
        assert!(!port.is_owner());
        assert_eq!(e.send_applet_direct(&port, ab, 0, 5), Some(TxStatus::Sent));
        assert!(port.is_owner());
        assert_eq!(b.recv().unwrap().to_vec(), b"first");
        assert_eq!(port.counts().tx_descriptors, 1);
        // A descriptor waiting in the transmit queue goes first.
        a.set_drive(false);
        a.send(ab, b"queued").unwrap();
        declines(&e, &port);
        assert_eq!(e.service(&port), 1);
        assert_eq!(b.recv().unwrap().to_vec(), b"queued");
        // The transmit side held by another thread.
        {
            let _held = port.tx.lock();
            declines(&e, &port);
        }
        // The applet removed.
        e.set_applet(a.id(), None).unwrap();
        declines(&e, &port);
        e.set_applet(a.id(), Some(crate::applets::STANDARD))
            .unwrap();
        a.write_area(0, b"again").unwrap();
        assert_eq!(e.send_applet_direct(&port, ab, 0, 5), Some(TxStatus::Sent));
        assert_eq!(b.recv().unwrap().to_vec(), b"again");
        // The channel closed (the endpoint's own check not consulted).
        drop(b);
        declines(&e, &port);
    }

    /// A deferred message whose bytes are gone (a handle that names no
    /// array: the tail site's proof excludes it, so no bytecode reaches
    /// this) is a counted drop, never a panic: the descriptor completes as
    /// one the applet dropped (`applet_drops`), nothing else is sent or
    /// counted for it, and the endpoint goes on.
    #[test]
    fn a_deferred_message_whose_bytes_are_gone_is_a_counted_drop() {
        let (e, mut a, mut b, ab) = tail_pair(None);
        let port = e.port(a.id()).unwrap();
        // The first message takes the channel's verdict, so that the next
        // `doTx` opens the deferring window.
        a.send(ab, b"first").unwrap();
        assert_eq!(b.recv().unwrap().to_vec(), b"first");
        let before = port.counts();
        // Mode 2 pushes eagerly; the message planted here stands for one a
        // tail push deferred whose array is gone by the invocation's end.
        e.with_applet(a.id(), |ap| ap.set_static_int("mode", 2))
            .unwrap()
            .unwrap();
        port.rx.lock().io.deferred = Some(Deferred {
            array: i32::MAX,
            off: 0,
            len: 4,
            chan: ab,
        });
        a.send(ab, b"eager").unwrap();
        assert_eq!(b.recv().unwrap().to_vec(), b"eager");
        assert!(b.recv().is_none());
        let after = port.counts();
        assert_eq!(after.applet_drops, before.applet_drops + 1);
        assert_eq!(after.applet_traps, before.applet_traps);
        assert_eq!(after.tx_frames, before.tx_frames + 1);
        assert!(port.rx.lock().io.deferred.is_none());
        // The endpoint goes on as before.
        e.with_applet(a.id(), |ap| ap.set_static_int("mode", 0))
            .unwrap()
            .unwrap();
        a.send(ab, b"after").unwrap();
        assert_eq!(b.recv().unwrap().to_vec(), b"after");
        assert_eq!(port.counts().applet_drops, before.applet_drops + 1);
    }

    /// The standard applet's tail push runs inline on the JIT: each message
    /// after the channel's first (which takes the verdict, so that the
    /// next `doTx` may defer) is recorded by the generated code and taken
    /// by [`Io::take_tail`], none by the native. The JIT-against-interpreter
    /// tests (`tests/tail_inline.rs`) cannot see this, since the form's
    /// outcomes are the native's; without it a lending that stopped
    /// (`Io::lend_tail`, `Engine::may_defer`) would pass them. On the
    /// interpreter nothing is recorded inline, and the messages arrive
    /// the same.
    #[test]
    fn the_standard_applets_tail_push_runs_inline_on_the_jit() {
        let e = engine();
        let std = Some(crate::applets::STANDARD);
        let (mut a, mut b, ab, _) = linked(&e, std, std);
        let port = e.port(a.id()).unwrap();
        let inline = || port.rx.lock().io.inline_tails;
        a.send(ab, b"first").unwrap();
        assert_eq!(b.recv().unwrap().to_vec(), b"first");
        let before = inline();
        for i in 0..10u8 {
            a.send(ab, &[i; 40]).unwrap();
            assert_eq!(b.recv().unwrap().to_vec(), [i; 40]);
        }
        assert_eq!(inline(), before + 10, "each tail push recorded inline");
        e.with_applet(a.id(), |ap| ap.set_engine(jive::Engine::Interpreter))
            .unwrap()
            .unwrap();
        for i in 0..10u8 {
            a.send(ab, &[i; 40]).unwrap();
            assert_eq!(b.recv().unwrap().to_vec(), [i; 40]);
        }
        assert_eq!(inline(), before + 10, "the interpreter calls the native");
    }

    /// [`the_standard_applets_tail_push_runs_inline_on_the_jit`] for a
    /// push that writes its frame at once (to an endpoint of another
    /// engine): on the JIT each frame is written by the generated code
    /// and taken by [`Io::take_frame`], none by the native; on the
    /// interpreter none, and the messages arrive the same.
    #[test]
    fn the_standard_applets_eager_tail_push_writes_its_frame_inline_on_the_jit() {
        let net = LoopNet::new();
        let on = |addr: &str| Engine::new(Box::new(net.attach(addr.parse().unwrap()).unwrap()));
        let (e, r) = (on("10.0.0.1:7000"), on("10.0.0.2:7000"));
        let std = Some(crate::applets::STANDARD);
        let mut a = e.create_endpoint(Config::default(), std).unwrap();
        let mut far = r.create_endpoint(Config::default(), std).unwrap();
        let af = a.open_channel(r.local(), far.id()).unwrap();
        far.open_channel(e.local(), a.id()).unwrap();
        let aid = a.id();
        let port = e.port(aid).unwrap();
        let frames = || port.rx.lock().io.inline_frames;
        let mut send_and_receive = |i: u8| {
            a.send(af, &[i; 40]).unwrap();
            e.poll();
            r.poll();
            assert_eq!(far.recv().unwrap().to_vec(), [i; 40]);
        };
        // The first two frames are the native's: the receive and the
        // transmit outbox (which change places around each `doTx`) are
        // empty vectors until a push grows them, with no room to lend.
        send_and_receive(0);
        send_and_receive(1);
        assert_eq!(frames(), 0, "no room in a cold outbox");
        for i in 0..10u8 {
            send_and_receive(i);
        }
        assert_eq!(frames(), 10, "each frame written inline");
        e.with_applet(aid, |ap| ap.set_engine(jive::Engine::Interpreter))
            .unwrap()
            .unwrap();
        for i in 0..10u8 {
            send_and_receive(i);
        }
        assert_eq!(frames(), 10, "the interpreter calls the native");
    }

    /// An endpoint with `TailPush` (`a`, in `mode` if one is given) and
    /// one with the standard applet (`b`), with a channel `ab` from `a` to
    /// `b` and one back.
    fn tail_pair(mode: Option<i32>) -> (Engine, Endpoint, Endpoint, u16) {
        let e = engine();
        let (a, b, ab, _) = linked(
            &e,
            Some(crate::applets::TAIL_PUSH),
            Some(crate::applets::STANDARD),
        );
        if let Some(mode) = mode {
            e.with_applet(a.id(), |ap| ap.set_static_int("mode", mode))
                .unwrap()
                .unwrap();
        }
        (e, a, b, ab)
    }

    /// [`tail_pair`] with `b`'s thread not this one (claimed by a thread
    /// of its own), the channel's verdict taken by the first message
    /// (received on another thread).
    fn to_another_thread(mode: i32) -> (Engine, Endpoint, Endpoint, u16) {
        let (e, mut a, mut b, ab) = tail_pair(Some(mode));
        assert!(recv_elsewhere(&mut b).is_empty());
        a.send(ab, b"first").unwrap();
        assert_eq!(recv_elsewhere(&mut b), [b"first".to_vec()]);
        (e, a, b, ab)
    }

    /// What `ep` receives, on a thread of its own (which claims it).
    fn recv_elsewhere(ep: &mut Endpoint) -> Vec<Vec<u8>> {
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut got = Vec::new();
                while let Some(m) = ep.recv() {
                    got.push(m.to_vec());
                }
                got
            })
            .join()
            .unwrap()
        })
    }

    /// The counters of the engine and of both endpoints.
    fn all_counts(e: &Engine, a: &Port, b: &Port) -> (EngineCounts, PortCounts, PortCounts) {
        (e.counts(), a.counts(), b.counts())
    }

    /// A message deferred to a receiver of another thread goes into that
    /// receiver's inbox as the message alone (no frame's header: the
    /// verdict is taken), with no frame made in either outbox, and arrives
    /// whole; nothing but the receiver's delivery is counted for it.
    #[test]
    fn a_deferred_message_to_another_threads_applet_goes_into_its_inbox_without_a_frame() {
        let (e, mut a, mut b, ab) = to_another_thread(0);
        let (pa, pb) = (e.port(a.id()).unwrap(), e.port(b.id()).unwrap());
        let sent = b"straight into the inbox".to_vec();
        // `TxBuf` holding the message, and its handle (an even number, the
        // heap's slot for it).
        let array = e
            .with_applet(a.id(), |ap| {
                ap.set_static_array("TxBuf", &sent).unwrap();
                (1..4096).map(|h| 2 * h).find(|&h| {
                    matches!(ap.heap().get(h), Some(jive::Object::Bytes(v))
                        if bytemuck::cast_slice::<i8, u8>(v) == &sent[..])
                })
            })
            .unwrap()
            .expect("TxBuf's handle");
        let before = all_counts(&e, &pa, &pb);
        {
            let mut tx = pa.tx.lock();
            let mut rx = pa.rx.lock();
            let m = Deferred {
                array,
                off: 0,
                len: sent.len() as u32,
                chan: ab,
            };
            assert!(e.resolve_deferred(&mut tx, &mut rx, &pa, m, Src::Heap, Me::current()));
            assert!(rx.io.framer.out.is_empty(), "no frame made");
            assert!(tx.framer.out.is_empty() && tx.next.is_empty());
        }
        // The inbox holds the message's bytes alone.
        let mut frames = Vec::new();
        let ch = pa.tx.lock().framer.channels[usize::from(ab)]
            .clone()
            .unwrap();
        let n = pb.drain_inbox(&mut pb.rx.lock(), |_, chan, framed, f| {
            frames.push((chan, framed, f.to_vec()));
            true
        });
        assert_eq!(n, 1);
        let (chan, framed, f) = &frames[0];
        assert_eq!(Some(*chan), ch.verdict.owner.map(|o| o as u16));
        assert!(!framed, "a message, not a frame");
        assert_eq!(f[..], sent[..]);
        assert_eq!(all_counts(&e, &pa, &pb), before);
        // The way a `doTx` takes it: the message arrives, counted once.
        let again = b"again".to_vec();
        a.send(ab, &again).unwrap();
        assert_eq!(recv_elsewhere(&mut b), [again]);
        assert_eq!(pa.counts().tx_frames, before.1.tx_frames + 1);
        // And that way opens the window for this peer (another thread's,
        // with an applet), so the message went by `enqueue_deferred`.
        assert!(
            e.may_defer(&pa.tx.lock(), ab, 5, Me::current()),
            "no deferring window for another thread's applet"
        );
    }

    /// A `doTx` whose message will go into another thread's applet inbox
    /// has the lines its push writes asked for before it runs
    /// ([`inbox::Inbox::ask_for_push_lines`], from `may_defer`): the tag's
    /// line at every length, and for an entry longer than the copy beside
    /// the tag, the ring's lines from the producers' position, where the
    /// entry then lies, up to [`inbox::ASK_LINES_MAX`] of them. A message
    /// to this thread's own receiver, delivered without its inbox, asks
    /// for nothing. Every message arrives whole.
    #[test]
    fn a_send_to_another_threads_applet_asks_for_its_push_lines_before_dotx() {
        use inbox::{PUSH_ASKED, TAG_ASKED};
        let (e, mut a, mut b, ab) = to_another_thread(0);
        let pb = e.port(b.id()).unwrap();
        let line = 64;
        for len in [0usize, 40, 56, 57, 64, 200, 1000, 1017, 4000] {
            let msg: Vec<u8> = (0..len).map(|i| i as u8 ^ 0x5a).collect();
            let at = pb.inbox.producer_at() as usize;
            TAG_ASKED.with(|n| n.set(0));
            PUSH_ASKED.with(|f| f.set(None));
            a.send(ab, &msg).unwrap();
            assert_eq!(TAG_ASKED.with(|n| n.get()), 1, "{len} B: the tag's line");
            let want = (len > inbox::COPY_MAX).then(|| {
                let footprint = (8 + 7 + len) & !7;
                let lines = (at % line + footprint).div_ceil(line);
                (at - at % line, lines.min(inbox::ASK_LINES_MAX))
            });
            assert_eq!(PUSH_ASKED.with(|f| f.get()), want, "{len} B at {at}");
            assert_eq!(recv_elsewhere(&mut b), [msg], "{len} B");
        }
        // `b` claimed by this thread: the message goes into its `RxBuf`.
        assert!(b.recv().is_none());
        TAG_ASKED.with(|n| n.set(0));
        a.send(ab, b"here").unwrap();
        assert_eq!(b.recv().map(|m| m.to_vec()), Some(b"here".to_vec()));
        assert_eq!(
            TAG_ASKED.with(|n| n.get()),
            0,
            "asked for this thread's own receiver"
        );
    }

    /// A message of up to [`INLINE_MAX`] bytes sent to an endpoint of the
    /// same engine without applet asks, before its checks, for the line of
    /// the receive slot it then goes to (the receiver's published producer
    /// index, masked, whatever the application wrote there), whichever
    /// thread receives it; a longer message, or one to an endpoint with an
    /// applet, asks for none. Every message arrives whole.
    #[test]
    fn a_short_send_asks_for_its_receive_slot_before_its_checks() {
        use crate::ring::QueueMem;
        use crate::shm::RX_SLOT_ASKED;
        let e = engine();
        let (mut a, mut b, ab, _) = linked(&e, None, None);
        let pb = e.port(b.id()).unwrap();
        let depth = pb.layout.rx.depth;
        // The channel's first message is classified, and its verdict kept
        // for those after it, which go directly.
        a.send(ab, b"first").unwrap();
        assert_eq!(b.recv().map(|m| m.to_vec()), Some(b"first".to_vec()));
        for (k, len) in [0usize, 1, 40, 56, 57, 200, 1000, 56, 8]
            .into_iter()
            .enumerate()
        {
            let msg: Vec<u8> = (0..len).map(|i| (i + k) as u8).collect();
            let head = pb.rx_queue.head().load(Ordering::Relaxed);
            RX_SLOT_ASKED.with(|f| f.set(None));
            a.send(ab, &msg).unwrap();
            let want = (len <= INLINE_MAX).then_some(head & (depth - 1));
            assert_eq!(RX_SLOT_ASKED.with(|f| f.get()), want, "{len} B");
            assert_eq!(b.recv().map(|m| m.to_vec()), Some(msg), "{len} B");
        }
        // An index the application scribbled over: the slot it names,
        // masked, asked for (a hint, inside the queue), the message
        // delivered where the engine's own index says, and that index
        // published over the scribble.
        let head = pb.rx_queue.head().load(Ordering::Relaxed);
        pb.rx_queue.head().store(0xdead_beef, Ordering::Relaxed);
        RX_SLOT_ASKED.with(|f| f.set(None));
        a.send(ab, b"scribbled").unwrap();
        assert_eq!(
            RX_SLOT_ASKED.with(|f| f.get()),
            Some(0xdead_beef & (depth - 1))
        );
        assert_eq!(
            pb.rx_queue.head().load(Ordering::Relaxed),
            head.wrapping_add(1)
        );
        assert_eq!(b.recv().map(|m| m.to_vec()), Some(b"scribbled".to_vec()));
        // Received on another thread: the same slot asked for.
        let head = pb.rx_queue.head().load(Ordering::Relaxed);
        RX_SLOT_ASKED.with(|f| f.set(None));
        a.send(ab, b"there").unwrap();
        assert_eq!(RX_SLOT_ASKED.with(|f| f.get()), Some(head & (depth - 1)));
        std::thread::scope(|s| {
            s.spawn(|| assert_eq!(b.recv().map(|m| m.to_vec()), Some(b"there".to_vec())));
        });
        // To an endpoint with an applet: nothing asked for.
        let e = engine();
        let lent = Some(crate::applets::STANDARD_LENT);
        let (mut a, mut b, ab, _) = linked(&e, None, lent);
        for msg in [&b"first"[..], b"applet"] {
            RX_SLOT_ASKED.with(|f| f.set(None));
            a.send(ab, msg).unwrap();
            assert_eq!(RX_SLOT_ASKED.with(|f| f.get()), None);
            assert_eq!(b.recv().map(|m| m.to_vec()), Some(msg.to_vec()));
        }
    }

    /// Two endpoints with the lent standard applet on two threads, 1,000
    /// bytes from `a` to `b`, one at a time, enough to pass the warm
    /// window's end: where `b` answers each message (a round trip), both
    /// inboxes keep to the ring's warm start (each endpoint's sends tell
    /// its inbox, [`inbox::Inbox::answered`], whether by `send` and its
    /// `doTx`, as here); where `b` only receives (a stream it keeps up
    /// with), `b`'s inbox is never marked and its producer walks the ring.
    #[test]
    fn a_round_trip_keeps_to_its_inboxs_warm_start_and_a_stream_walks_on() {
        use std::sync::atomic::AtomicUsize;
        let msg = [7u8; 1000];
        let n = inbox::COLD as usize / msg.len() + 50;
        for answer in [true, false] {
            let e = engine();
            let lent = Some(crate::applets::STANDARD_LENT);
            let (mut a, mut b, ab, ba) = linked(&e, lent, lent);
            let (pa, pb) = (e.port(a.id()).unwrap(), e.port(b.id()).unwrap());
            let got = AtomicUsize::new(0);
            std::thread::scope(|s| {
                s.spawn(|| {
                    for _ in 0..n {
                        let m = loop {
                            if let Some(m) = b.recv() {
                                break m.to_vec();
                            }
                            std::hint::spin_loop();
                        };
                        assert_eq!(m, msg);
                        got.fetch_add(1, Ordering::Release);
                        if answer {
                            b.send(ba, b"ack").unwrap();
                        }
                    }
                });
                for k in 0..n {
                    a.send(ab, &msg).unwrap();
                    if answer {
                        while a.recv().is_none() {
                            std::hint::spin_loop();
                        }
                    } else {
                        while got.load(Ordering::Acquire) <= k {
                            std::hint::spin_loop();
                        }
                    }
                }
            });
            assert_eq!(got.load(Ordering::Relaxed), n);
            let (at_a, at_b) = (pa.inbox.producer_at(), pb.inbox.producer_at());
            if answer {
                // Within a frame's footprint past the warm start (a
                // message's is smaller: no frame's header).
                let fp = |len: usize| inbox::footprint(len + frame::HEADER_LEN);
                let past = |len: usize| inbox::WARM + fp(len);
                assert!(at_b <= past(1000), "b's inbox at {at_b}");
                assert!(at_a <= past(3), "a's inbox at {at_a}");
            } else {
                assert!(at_b >= inbox::COLD, "b's inbox at {at_b}");
            }
        }
    }

    /// The ping-pong applets on two threads, 1,000 bytes bounced between
    /// their `doRx`s, each inbox's frames past the warm start a few times:
    /// each `doRx` that answers tells its inbox
    /// ([`inbox::Inbox::answered`], from the drain), so both inboxes keep
    /// to the ring's warm start.
    #[test]
    fn a_ping_pong_between_two_threads_keeps_to_its_inboxs_warm_start() {
        use std::sync::atomic::AtomicBool;
        const N: i32 = 400;
        const _: () = assert!(N as u64 * 1000 / 2 > 3 * inbox::WARM);
        let e = engine();
        let pp = Some(crate::applets::PING_PONG);
        let (mut a, mut b, ab, _) = linked(&e, pp, pp);
        let (pa, pb) = (e.port(a.id()).unwrap(), e.port(b.id()).unwrap());
        e.with_applet(a.id(), |ap| ap.set_static_int("limit", N))
            .unwrap()
            .unwrap();
        let done = AtomicBool::new(false);
        let count = std::thread::scope(|s| {
            s.spawn(|| {
                // `b`'s thread: its receive calls drain its inbox, where
                // `doRx` echoes each message; its application gets none.
                while !done.load(Ordering::Acquire) {
                    assert!(
                        b.recv().is_none(),
                        "the echoing application received a message"
                    );
                }
            });
            // The exchange starts once `b`'s thread has claimed `b` (no
            // thread has before its first receive call).
            while pb.owner.load(Ordering::Acquire) == 0 {
                std::hint::spin_loop();
            }
            a.send(ab, &[9u8; 1000]).unwrap();
            let count = loop {
                if let Some(m) = a.recv() {
                    break m.to_vec();
                }
            };
            done.store(true, Ordering::Release);
            count
        });
        assert_eq!(count, N.to_be_bytes());
        let (at_a, at_b) = (pa.inbox.producer_at(), pb.inbox.producer_at());
        // A frame's footprint: 1,000 bytes, a frame's header, the inbox's.
        let fp = inbox::footprint(1000 + frame::HEADER_LEN);
        let past = inbox::WARM + fp;
        assert!(at_a <= past, "a's inbox at {at_a}");
        assert!(at_b <= past, "b's inbox at {at_b}");
    }

    /// A receiver of another thread found closed (its flag, or its inbox
    /// closed under the producers' lock) after its applet's flag was read:
    /// the deferred message is counted as the engine's `closed`, as its
    /// frame is, and nothing enters the inbox; the tail push (mode 0) and
    /// the eager push (mode 2) count alike.
    #[test]
    fn a_deferred_message_to_a_closed_receiver_of_another_thread_counts_as_its_frame() {
        for inbox_closed in [false, true] {
            let mut counted = Vec::new();
            for mode in [0, 2] {
                let (e, mut a, b, ab) = to_another_thread(mode);
                let (pa, pb) = (e.port(a.id()).unwrap(), e.port(b.id()).unwrap());
                if inbox_closed {
                    assert_eq!(pb.close_inbox(&pb.rx.lock()), 0);
                } else {
                    pb.closed.store(true, Ordering::Release);
                }
                let before = all_counts(&e, &pa, &pb);
                a.send(ab, b"lost").unwrap();
                let after = all_counts(&e, &pa, &pb);
                let what = format!("mode {mode}, inbox closed {inbox_closed}");
                assert_eq!(after.0.closed, before.0.closed + 1, "{what}");
                assert_eq!(after.1.tx_frames, before.1.tx_frames + 1, "{what}");
                assert_eq!(after.1.applet_drops, before.1.applet_drops, "{what}");
                assert_eq!(after.2, before.2, "{what}");
                assert!(pb.inbox.is_empty(), "{what}");
                counted.push((after.0.closed - before.0.closed, after.1, after.2));
            }
            assert_eq!(counted[0], counted[1], "inbox closed {inbox_closed}");
        }
    }

    /// A deferred message to a receiver of another thread whose bytes are
    /// gone (a handle that names no array) goes into no inbox and is
    /// counted nowhere by [`Engine::resolve_deferred`], which says so
    /// (`false`: [`applet_tx`] counts it dropped, as the same-thread test
    /// above shows); the endpoint goes on.
    #[test]
    fn a_deferred_message_to_another_thread_whose_bytes_are_gone_is_not_sent() {
        let (e, mut a, mut b, ab) = to_another_thread(0);
        let (pa, pb) = (e.port(a.id()).unwrap(), e.port(b.id()).unwrap());
        let before = all_counts(&e, &pa, &pb);
        {
            let mut tx = pa.tx.lock();
            let mut rx = pa.rx.lock();
            let m = Deferred {
                array: i32::MAX - 1,
                off: 0,
                len: 4,
                chan: ab,
            };
            assert!(!e.resolve_deferred(&mut tx, &mut rx, &pa, m, Src::Heap, Me::current()));
            assert!(rx.io.framer.out.is_empty() && tx.framer.out.is_empty());
        }
        assert!(pb.inbox.is_empty());
        assert_eq!(all_counts(&e, &pa, &pb), before);
        a.send(ab, b"after").unwrap();
        assert_eq!(recv_elsewhere(&mut b), [b"after".to_vec()]);
    }

    /// The order of an endpoint's frames across two threads: `a`
    /// (`PingPong`: `doRx` echoes each message on its channel, `doTx`
    /// sends the application's) drained by a thread that is not its own
    /// (`T1`, an engine thread's place), which `doRx` echoes `r` to `b`
    /// (no applet) on the channel `ab`; this thread, `a`'s application's,
    /// sends `x` on `ab` through `doTx` while `T1` is parked at `window`
    /// in [`Engine::pump_drained`]. The applet pushed `r` first, so `b`
    /// receives `r`, then `x`, each once, counted once. Returns the
    /// messages `b` received with `T1` parked, then all of them. With
    /// `remove`, this thread removes `a`'s applet before it sends `x` (which
    /// then goes without `doTx`).
    fn order_across(window: Window, remove: bool) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
        let e = engine();
        let mut a = e
            .create_endpoint(Config::default(), Some(crate::applets::PING_PONG))
            .unwrap();
        let mut b = e.create_endpoint(Config::default(), None).unwrap();
        let ab = a.open_channel(e.local(), b.id()).unwrap();
        let ba = b.open_channel(e.local(), a.id()).unwrap();
        let (pa, pb) = (e.port(a.id()).unwrap(), e.port(b.id()).unwrap());
        // `a` is another thread's: `b`'s message waits in its inbox.
        assert!(recv_elsewhere(&mut a).is_empty());
        b.send(ba, b"r").unwrap();
        assert!(!pa.inbox.is_empty());
        let before = all_counts(&e, &pa, &pb);
        let recv_all = |b: &mut Endpoint| {
            let mut got = Vec::new();
            while let Some(m) = b.recv() {
                got.push(m.to_vec());
            }
            got
        };
        // At `Handed`, this thread holds the transmit side when `T1`
        // tries it.
        let held = (window == Window::Handed).then(|| pa.tx.lock());
        let (reached, at) = std::sync::mpsc::channel();
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let parked = std::thread::scope(|s| {
            let t1 = s.spawn(|| {
                AT_WINDOW.with(|h| {
                    *h.borrow_mut() = Some(Box::new(move |w| {
                        if w == window {
                            reached.send(()).unwrap();
                            wait.recv().unwrap();
                        }
                    }));
                });
                let n = e.drain(&pa);
                AT_WINDOW.with(|h| h.borrow_mut().take());
                n
            });
            at.recv_timeout(Duration::from_secs(10))
                .unwrap_or_else(|_| panic!("the drain never reached {window:?}"));
            drop(held);
            if remove {
                e.set_applet(a.id(), None).unwrap();
            }
            a.send(ab, b"x").unwrap();
            let parked = recv_all(&mut b);
            go.send(()).unwrap();
            assert_eq!(t1.join().unwrap(), 1);
            parked
        });
        // What waits in `a`'s transmit queue (`x`, if `T1` held the
        // transmit side when it was sent) goes now.
        e.service(&pa);
        let mut all = parked.clone();
        all.extend(recv_all(&mut b));
        let after = all_counts(&e, &pa, &pb);
        if !remove {
            assert_eq!(after.1.tx_frames, before.1.tx_frames + 2);
        }
        assert_eq!(after.1.tx_descriptors, before.1.tx_descriptors + 1);
        assert_eq!(after.2.rx_delivered, before.2.rx_delivered + 2);
        assert_eq!(
            (after.0.closed, after.0.unmatched, after.1.applet_drops),
            (before.0.closed, before.0.unmatched, before.1.applet_drops)
        );
        assert!(pa.inbox.is_empty());
        assert!(pa.rx.lock().io.framer.out.is_empty());
        (parked, all)
    }

    /// `T1` parked with the frames `doRx` made not yet sent, the receive
    /// lock let go: `x`'s `doTx` cannot send before them, since `T1`
    /// holds the transmit side (`x` waits in the transmit queue).
    #[test]
    fn a_drains_frames_go_before_a_later_dotx_on_another_thread() {
        let (parked, all) = order_across(Window::Pump, false);
        assert!(parked.is_empty(), "{parked:?}");
        assert_eq!(all, [b"r".to_vec(), b"x".to_vec()]);
    }

    /// `T1` found the transmit side held and handed its frames back to the
    /// receive side's outbox: the next `doTx` (on this thread) sends them
    /// ahead of its own, and `T1` then finds nothing left to send.
    #[test]
    fn a_drains_frames_handed_back_go_ahead_of_the_next_dotx() {
        let (parked, all) = order_across(Window::Handed, false);
        assert_eq!(parked, [b"r".to_vec(), b"x".to_vec()]);
        assert_eq!(all, parked);
    }

    /// As above, but the applet is removed before the next send: no
    /// `doTx` runs to find the frames handed back, so `set_applet` sends
    /// them, ahead of `x` (the review's O1: before, `x` went first and the
    /// frames after it, once `T1` held the transmit side).
    #[test]
    fn a_drains_frames_handed_back_go_ahead_when_the_applet_goes() {
        let (parked, all) = order_across(Window::Handed, true);
        assert_eq!(parked, [b"r".to_vec(), b"x".to_vec()]);
        assert_eq!(all, parked);
    }
}
