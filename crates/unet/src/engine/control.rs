//! Control operations, off the data path: creating and removing
//! endpoints, opening and closing channels, installing filters and applets.
//! They serialise on the engine's control lock; a filter is compiled by
//! dpf, and an applet verified and compiled by jive, before that lock or
//! an endpoint's side locks are taken, so a large filter or applet holds
//! up no other client; an endpoint is built (its segment, its applet's
//! constructor) in a slot taken under the control lock, without holding it.

use super::*;

impl Engine {
    /// Creates an endpoint's segment and port, with an applet if given.
    pub fn create_port(
        &self,
        config: Config,
        applet: Option<&[u8]>,
    ) -> Result<Arc<Port>, EngineError> {
        self.create_port_admitted(config, applet, |_| Ok(()))
    }

    /// [`Engine::create_port`], asking `admit` once the applet is compiled,
    /// before anything changes, whether it may be taken (its code, its
    /// memory: the daemon's budgets per process). An error from `admit` is
    /// returned, the applet dropped.
    pub fn create_port_admitted(
        &self,
        config: Config,
        applet: Option<&[u8]>,
        admit: impl FnOnce(&jive::Unconstructed) -> Result<(), EngineError>,
    ) -> Result<Arc<Port>, EngineError> {
        Layout::new(config)?;
        // Before the control lock, which every client's control
        // operations take ([`Engine::compile_applet`]).
        let applet = applet
            .map(|bytes| self.compile_applet(None, bytes))
            .transpose()?;
        self.create_port_compiled(config, applet, admit)
    }

    /// Verifies an applet and compiles its code for endpoint `id` (`None`:
    /// for one not yet created), touching nothing of the engine's: all of
    /// a load's cost but its constructor's, which fuel and the time budget
    /// bound (`Budgets::applet_time`). The rest is
    /// [`Engine::create_port_compiled`] or [`Engine::set_applet_compiled`];
    /// a caller that wants this work below the engine's threads in
    /// priority (the daemon) runs it on a thread of its own.
    pub fn compile_applet(
        &self,
        id: Option<EndpointId>,
        bytes: &[u8],
    ) -> Result<jive::Unconstructed, EngineError> {
        match id {
            Some(id) => compile_applet(bytes, &self.port_or_err(id)?.budgets),
            None => compile_applet(bytes, &self.inner.budgets),
        }
    }

    /// [`Engine::create_port_admitted`] with its applet compiled already
    /// ([`Engine::compile_applet`] with `None`).
    pub fn create_port_compiled(
        &self,
        config: Config,
        applet: Option<jive::Unconstructed>,
        admit: impl FnOnce(&jive::Unconstructed) -> Result<(), EngineError>,
    ) -> Result<Arc<Port>, EngineError> {
        let layout = Layout::new(config)?;
        if let Some(a) = &applet {
            admit(a)?;
        }
        // The slot and id are taken under the control lock, the endpoint
        // built without it (its segment, and the applet's constructor,
        // which fuel and the time budget bound to milliseconds), and
        // published under it.
        let (slot, id) = {
            let mut control = lock(&self.inner.control);
            let ports = self.inner.ports.load_full();
            let generations = lock(&self.inner.generations);
            let gen_of = |i: u16| generations.get(usize::from(i)).copied().unwrap_or(0);
            let slot = (1..=u16::MAX)
                .find(|&i| {
                    ports.get(usize::from(i)).is_none_or(Option::is_none)
                        && gen_of(i) < u16::MAX
                        && !control.reserved.contains(&i)
                })
                .ok_or(EngineError::Exhausted(
                    "every endpoint slot is in use or has used up its generations",
                ))?;
            control.reserved.push(slot);
            (slot, endpoint_id(slot, gen_of(slot) + 1))
        };
        let built = self.build_port(id, layout, applet);
        let mut control = lock(&self.inner.control);
        control.reserved.retain(|&r| r != slot);
        let port = built?;
        let mut next: Vec<Option<Arc<Port>>> = self.inner.ports.load_full().as_ref().clone();
        let at = usize::from(slot);
        if next.len() <= at {
            next.resize(at + 1, None);
        }
        next[at] = Some(port.clone());
        let mut generations = lock(&self.inner.generations);
        if generations.len() <= at {
            generations.resize(at + 1, 0);
        }
        generations[at] = endpoint_generation(id);
        self.inner.ports.store(Arc::new(next));
        Ok(port)
    }

    /// The endpoint `id` of [`Engine::create_port`], not yet published.
    fn build_port(
        &self,
        id: EndpointId,
        layout: Layout,
        applet: Option<jive::Unconstructed>,
    ) -> Result<Arc<Port>, EngineError> {
        let budgets = self.inner.budgets;
        let slot = endpoint_slot(id);
        let seg = Arc::new(Segment::create(
            &format!("unet-endpoint-{slot}.{}", endpoint_generation(id)),
            layout.total,
        )?);
        seg.write_header(&layout.header(id));
        let (txq, rxq, freeq) = queues(&seg, &layout)?;
        // Never: the segment is the layout's size. (`area_len` is at most
        // `MAX_AREA`, 2^30: a `u32`.)
        let area = seg
            .area_bytes(layout.area, layout.area_len as u32)
            .ok_or_else(|| {
                crate::error::ConfigError::Layout(
                    "the buffer area is past the segment's end".into(),
                )
            })?;
        let rx_slots = rxq.rx_slots();
        let rx_queue = rxq.clone();
        let free_slots = freeq.free_slots();
        let stats = Arc::new(PortStats::default());
        let framer = || -> Result<Framer, EngineError> {
            let pipeline =
                |steps: &[ilp::Step]| ilp::Pipeline::new(steps).map_err(EngineError::from);
            Ok(Framer {
                id,
                channels: Vec::new(),
                reach: self.inner.reach.clone(),
                out: Outbox::default(),
                stats: stats.clone(),
                max_message: layout.config.max_message().min(self.inner.max_payload),
                copy: pipeline(&[ilp::Step::Copy])?,
                copy_sum: pipeline(&[ilp::Step::Copy, ilp::Step::Checksum])?,
            })
        };
        let io_budgets = Budgets {
            push_frames: budgets.push_frames.min(layout.config.tx_depth as usize),
            ..budgets
        };
        let rx_framer = framer()?;
        let mut rx = RxSide {
            io: Io {
                seg: seg.clone(),
                layout,
                rx: Producer::new(rxq),
                free: Consumer::new(freeq),
                spare: Vec::with_capacity(RX_BUFFERS_MAX),
                stats: stats.clone(),
                inv: Invocation::new(
                    rx_slots,
                    free_slots,
                    area.clone(),
                    &layout,
                    &io_budgets,
                    rx_framer.max_message,
                ),
                framer: rx_framer,
                budgets: io_budgets,
                unpublished: false,
                ring_lent: false,
                free_lent: false,
                defer: false,
                deferred: None,
                held: 0..0,
                tx_lent: 0..0,
                #[cfg(test)]
                inline_tails: 0,
                #[cfg(test)]
                inline_frames: 0,
            },
            applet: None,
            policy: TrapPolicy::Keep,
            traps_since_install: 0,
            overruns_in_row: 0,
        };
        if let Some(applet) = applet {
            rx.applet = Some(load_applet(applet, &mut rx.io)?);
        }
        let port = Arc::new(Port {
            id,
            seg,
            layout,
            area,
            rx_queue,
            tx: CacheLine(SideLock::new(TxSide {
                tx: Consumer::new(txq),
                framer: framer()?,
                next: Outbox::default(),
            })),
            has_applet: AtomicBool::new(rx.applet.is_some()),
            lends_tx: AtomicBool::new(rx.applet.as_ref().is_some_and(Loaded::lends_tx)),
            rx: CacheLine(SideLock::new(rx)),
            inbox: CacheLine(inbox::Inbox::new(budgets.inbox_frames, budgets.inbox_bytes)),
            closed: AtomicBool::new(false),
            owner: AtomicU64::new(0),
            filters: Mutex::new(Vec::new()),
            closed_chans: Mutex::new(Vec::new()),
            stats,
            budgets,
            throttle_until: AtomicU64::new(0),
        });
        Ok(port)
    }

    /// Installs a filter prepared (parsed, lowered, analyzed) before any
    /// lock was taken, and records its reach: under the locks only the
    /// table is merged and published, so a large filter's compilation
    /// holds up no other client, and one that does not compile never
    /// reaches the engine. The engine's reach grows before the filter is
    /// published, so that frames built from then on carry every byte it
    /// reads; a frame built before and classified after loses nothing but
    /// the new filter's verdict, as if it had been classified a moment
    /// earlier.
    ///
    /// Once the table is published the transport follows it
    /// ([`Transport::filters_changed`]; `xdp` swaps in the program built
    /// from it) before this returns; if it cannot, the filter is removed
    /// again and the error returned.
    pub(super) fn install(
        &self,
        filter: dpf::Prepared,
        owner: u32,
        priority: i32,
    ) -> Result<dpf::FilterId, EngineError> {
        let footprint = program_footprint(filter.program());
        let mut footprints = lock(&self.inner.footprints);
        self.inner
            .reach
            .fetch_max(footprint.reach, Ordering::AcqRel);
        let installed = lock(&self.inner.table).install_prepared(filter, owner, priority);
        if let Ok(fid) = installed {
            footprints.of.insert(fid, footprint);
        }
        self.publish_footprints(&mut footprints);
        let fid = installed?;
        if let Err(e) = self.sync_transport() {
            // The transport still filters by the table without this
            // filter: take it out again so that the two agree.
            let _ = lock(&self.inner.table).remove(fid);
            footprints.of.remove(&fid);
            self.publish_footprints(&mut footprints);
            let _ = self.sync_transport();
            return Err(e.into());
        }
        Ok(fid)
    }

    /// Removes filter `fid` from the table and its reach, then has the
    /// transport follow the table before returning (`xdp`: once this
    /// returns, the kernel redirects none of the filter's frames to the
    /// engine any more; see `docs/unet.md`). An error from the transport
    /// leaves the filter removed from the table, so that the engine
    /// delivers none of its frames whatever the kernel sends.
    pub(super) fn uninstall(&self, fid: dpf::FilterId) -> Result<(), EngineError> {
        self.uninstall_all(&[fid])
    }

    /// Removes every filter of `fids` from the table and their reaches,
    /// then has the transport follow the table once (`xdp`: one program
    /// swap and one wait for the old program's last runs, however many
    /// filters go) before returning. A filter the table does not have is
    /// skipped and its error returned after the others are gone; an error
    /// from the transport leaves them all removed, as `uninstall` does.
    pub(super) fn uninstall_all(&self, fids: &[dpf::FilterId]) -> Result<(), EngineError> {
        if fids.is_empty() {
            return Ok(());
        }
        let mut missing = None;
        let mut table = lock(&self.inner.table);
        for &fid in fids {
            if let Err(e) = table.remove(fid) {
                missing.get_or_insert(e);
            }
        }
        drop(table);
        let mut footprints = lock(&self.inner.footprints);
        for fid in fids {
            footprints.of.remove(fid);
        }
        self.publish_footprints(&mut footprints);
        drop(footprints);
        self.sync_transport()?;
        match missing {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }

    /// Hands the transport the table's published classifier. Lock order:
    /// the table's lock is let go before the transport's is taken (a
    /// receiving thread classifies under the transport's lock).
    fn sync_transport(&self) -> Result<(), crate::transport::TransportError> {
        let classifier = lock(&self.inner.table).classifier();
        lock(&self.inner.transport).filters_changed(&classifier)
    }

    /// Publishes what the installed filters' footprints allow, after every
    /// change of the table (under the footprints' lock): the engine's
    /// reach, and the version the transmit path's per-channel verdicts are
    /// valid for ([`Inner::verdicts`]): a new one, so that a verdict taken
    /// with an earlier table is never used again, or 0 if some filter's
    /// verdict on a channel's frame may depend on its message.
    pub(super) fn publish_footprints(&self, footprints: &mut Footprints) {
        let r = footprints
            .of
            .values()
            .map(|f| f.reach)
            .max()
            .unwrap_or(0)
            .max(HEADER_LEN);
        self.inner.reach.store(r, Ordering::Release);
        footprints.changes += 1;
        let version = if footprints.of.values().all(|f| f.per_channel) {
            footprints.changes
        } else {
            0
        };
        self.inner.verdicts.store(version, Ordering::Release);
    }

    /// Whether endpoint `id`, whose filters by channel are `filters`, may
    /// take one more ([`Budgets::filters`]).
    fn within_filter_budget(
        &self,
        id: EndpointId,
        filters: &[Option<Vec<dpf::FilterId>>],
    ) -> Result<(), EngineError> {
        let held: usize = filters.iter().flatten().map(Vec::len).sum();
        let limit = self.inner.budgets.filters;
        if held >= limit {
            return Err(EngineError::FilterBudget { id, limit });
        }
        Ok(())
    }

    pub(super) fn port_or_err(&self, id: EndpointId) -> Result<Arc<Port>, EngineError> {
        self.port(id)
            .ok_or_else(|| EngineError::NotFound(format!("no endpoint {id}")))
    }

    /// Removes endpoint `id`: its filters, its applet and its port. The
    /// segment is unmapped when the last user lets go of it. Returns the
    /// endpoint's counters at the end, read once its inbox is closed, so
    /// that they hold what the closing counted there (frames dropped
    /// behind a header that failed its check, in `queue_corrupt`), and
    /// once a transmit pass that began before the removal has ended; frames
    /// that were waiting for its applet are counted as the engine's
    /// `closed`.
    ///
    /// Every channel of another endpoint of this engine whose peer it was is
    /// closed: its filters go, sending on it completes as
    /// [`TxStatus::Closed`], and the endpoint that gets this slot next (with
    /// a new generation) is never taken for this one.
    pub fn remove_port(&self, id: EndpointId) -> Result<PortCounts, EngineError> {
        let _c = lock(&self.inner.control);
        let ports = self.inner.ports.load_full();
        let slot = usize::from(endpoint_slot(id));
        let Some(port) = ports
            .get(slot)
            .and_then(Clone::clone)
            .filter(|p| p.id == id)
        else {
            return Err(EngineError::NotFound(format!("no endpoint {id}")));
        };
        let mut next: Vec<Option<Arc<Port>>> = ports.as_ref().clone();
        next[slot] = None;
        self.inner.ports.store(Arc::new(next));
        // Its filters, and those of the channels of this engine's other
        // endpoints whose peer it was, go in one change of the table.
        let mut filters: Vec<_> = lock(&port.filters).drain(..).flatten().flatten().collect();
        let peers_of = lock(&self.inner.local_peers).remove(&id);
        let peers: Vec<_> = peers_of
            .into_iter()
            .flatten()
            .filter_map(|(owner, tag)| {
                let p = self.port(owner)?;
                filters.extend(take_channel_filters(&p, tag)?);
                Some((p, tag))
            })
            .collect();
        let _ = self.uninstall_all(&filters);
        port.has_applet.store(false, Ordering::Release);
        let mut rx = port.rx.lock();
        rx.applet = None;
        // Frames waiting for the applet, or delivered from now on by a
        // thread that found the port before it left the table, are counted
        // as lost to the closing. Closing the inbox takes its producers'
        // lock (see `inbox.rs`): a frame pushed before is emptied out and
        // counted here, one pushed after is refused and counted by its
        // producer.
        port.closed.store(true, Ordering::Release);
        let waiting = port.close_inbox(&rx);
        self.inner
            .stats
            .closed
            .fetch_add(waiting, Ordering::Relaxed);
        drop(rx);
        for (p, tag) in peers {
            mark_channel_closed(&p, tag);
        }
        // A transmit pass that took this port's transmit lock before the
        // removal counts its descriptors and frames under it: wait for it,
        // so that the counters returned hold them too.
        drop(port.tx.lock());
        Ok(port.counts())
    }

    /// The tags of endpoint `id`'s channels that were closed because their
    /// peer went away, in the order they closed.
    pub fn closed_channels(&self, id: EndpointId) -> Result<Vec<u16>, EngineError> {
        Ok(lock(&self.port_or_err(id)?.closed_chans).clone())
    }

    /// Opens a channel from endpoint `id` to endpoint `remote_ep` at
    /// `remote`, installing the filter that brings the peer's messages to
    /// it; returns the channel's tag.
    ///
    /// `remote_ep` is the peer's whole id, generation included: the filter
    /// admits only frames from that endpoint to this one, and the frames
    /// sent carry both generations, so neither end's slot passing to a new
    /// endpoint lets a frame through to it. A peer on this engine must
    /// exist, and when it goes the channel is closed.
    pub fn open_channel(
        &self,
        id: EndpointId,
        remote: Addr,
        remote_ep: EndpointId,
        opts: ChannelOptions,
    ) -> Result<u16, EngineError> {
        let port = self.port_or_err(id)?;
        let local = self.inner.local;
        let filter = dpf::Table::prepare(&format!(
            "udp and src host {} and udp src port {} and dst host {} and udp dst port {} \
             and udp[8:2] = {} and udp[10:2] = {} and udp[14:2] = {} and udp[16:2] = {}",
            remote.ip,
            remote.port,
            local.ip,
            local.port,
            endpoint_slot(id),
            endpoint_slot(remote_ep),
            endpoint_generation(id),
            endpoint_generation(remote_ep)
        ))?;
        let _c = lock(&self.inner.control);
        if remote == local && self.port(remote_ep).is_none() {
            return Err(EngineError::NotFound(format!(
                "no endpoint {remote_ep} on this engine (it has closed, or never existed)"
            )));
        }
        let mut filters = lock(&port.filters);
        self.within_filter_budget(id, &filters)?;
        let tag = (0..=u16::MAX)
            .find(|&t| filters.get(usize::from(t)).is_none_or(Option::is_none))
            .ok_or(EngineError::Exhausted(
                "every channel tag of this endpoint is in use",
            ))?;
        let owner = u32::from(endpoint_slot(id)) << 16 | u32::from(tag);
        let fid = self.install(filter, owner, 0)?;
        let hdr = frame::FrameHeader {
            src_mac: frame::MacAddr::from_ip(local.ip).0,
            dst_mac: frame::MacAddr::from_ip(remote.ip).0,
            src: local,
            dst: remote,
            dst_ep: remote_ep,
            src_ep: id,
            flags: if opts.checksum {
                frame::FLAG_UDP_CHECKSUM
            } else {
                0
            },
        };
        let template = hdr.template();
        let ch = Channel {
            length_sum: frame::length_sum(&template),
            template,
            flags: if opts.checksum { CHAN_CHECKSUM } else { 0 }
                | if remote == local { CHAN_LOCAL } else { 0 },
            verdict: Kept::default(),
        };
        if remote == local {
            lock(&self.inner.local_peers)
                .entry(remote_ep)
                .or_default()
                .push((id, tag));
        }
        let slot = usize::from(tag);
        if filters.len() <= slot {
            filters.resize(slot + 1, None);
        }
        filters[slot] = Some(vec![fid]);
        // Lock order: transmit side, then receive side.
        let mut tx = port.tx.lock();
        tx.framer.set_channel(tag, Some(ch.clone()));
        port.rx.lock().io.framer.set_channel(tag, Some(ch));
        Ok(tag)
    }

    /// Installs one more filter (pcap syntax) that delivers the frames it
    /// matches to channel `chan` of endpoint `id`, at `priority` (higher
    /// wins; channel filters have priority 0).
    pub fn install_filter(
        &self,
        id: EndpointId,
        chan: u16,
        filter: &str,
        priority: i32,
    ) -> Result<dpf::FilterId, EngineError> {
        self.port_or_err(id)?;
        // Compiled before the engine-wide lock: see `Engine::install`.
        let filter = dpf::Table::prepare(filter)?;
        self.install_prepared_filter(id, chan, filter, priority)
    }

    /// [`Engine::install_filter`] with the filter compiled already
    /// (`dpf::Table::prepare`, which touches nothing of the engine's: a
    /// caller that wants it below the engine's threads in priority, the
    /// daemon, runs it on a thread of its own).
    pub fn install_prepared_filter(
        &self,
        id: EndpointId,
        chan: u16,
        filter: dpf::Prepared,
        priority: i32,
    ) -> Result<dpf::FilterId, EngineError> {
        let port = self.port_or_err(id)?;
        let _c = lock(&self.inner.control);
        let mut filters = lock(&port.filters);
        self.within_filter_budget(id, &filters)?;
        let ch = filters
            .get_mut(usize::from(chan))
            .and_then(Option::as_mut)
            .ok_or_else(|| EngineError::NotFound(format!("endpoint {id} has no channel {chan}")))?;
        if lock(&port.closed_chans).contains(&chan) {
            return Err(EngineError::ChannelClosed { id, chan });
        }
        let owner = u32::from(endpoint_slot(id)) << 16 | u32::from(chan);
        let fid = self.install(filter, owner, priority)?;
        ch.push(fid);
        Ok(fid)
    }

    /// Removes a filter installed by [`Engine::install_filter`] (a
    /// channel's own filter goes only with its endpoint).
    pub fn remove_filter(&self, id: EndpointId, fid: dpf::FilterId) -> Result<(), EngineError> {
        let port = self.port_or_err(id)?;
        let _c = lock(&self.inner.control);
        let mut filters = lock(&port.filters);
        // A closed channel has no filters left, not even its own.
        let Some(ch) = filters
            .iter_mut()
            .flatten()
            .find(|c| c.get(1..).is_some_and(|extra| extra.contains(&fid)))
        else {
            return Err(EngineError::NotFound(format!(
                "endpoint {id} has no extra filter {}",
                fid.0
            )));
        };
        self.uninstall(fid)?;
        ch.retain(|&f| f != fid);
        Ok(())
    }

    /// Replaces endpoint `id`'s applet (`None`: standard U-Net). The new
    /// applet is loaded, verified and constructed first; if that fails the
    /// old one stays. Messages in flight see the old applet or the new one.
    pub fn set_applet(&self, id: EndpointId, applet: Option<&[u8]>) -> Result<(), EngineError> {
        self.set_applet_admitted(id, applet, |_| Ok(()))
    }

    /// [`Engine::set_applet`], asking `admit` as
    /// [`Engine::create_port_admitted`] does.
    pub fn set_applet_admitted(
        &self,
        id: EndpointId,
        applet: Option<&[u8]>,
        admit: impl FnOnce(&jive::Unconstructed) -> Result<(), EngineError>,
    ) -> Result<(), EngineError> {
        // Compiled before the endpoint's locks are taken, which an engine
        // thread delivering to it waits for ([`Engine::compile_applet`]).
        let applet = applet
            .map(|bytes| self.compile_applet(Some(id), bytes))
            .transpose()?;
        self.set_applet_compiled(id, applet, admit)
    }

    /// [`Engine::set_applet_admitted`] with the applet compiled already
    /// ([`Engine::compile_applet`] with `Some(id)`).
    pub fn set_applet_compiled(
        &self,
        id: EndpointId,
        applet: Option<jive::Unconstructed>,
        admit: impl FnOnce(&jive::Unconstructed) -> Result<(), EngineError>,
    ) -> Result<(), EngineError> {
        let port = self.port_or_err(id)?;
        if let Some(a) = &applet {
            admit(a)?;
        }
        // The transmit side first (the engine's lock order): frames a
        // drain's `doRx` made and handed back to the receive side's outbox
        // (`Engine::pump_drained`) wait there for the next `doTx`, which
        // no longer runs once the applet goes, so they are sent here,
        // under the transmit lock, before anything this endpoint sends
        // after the change.
        let tx = port.tx.lock();
        let mut rx = port.rx.lock();
        let loaded = match applet {
            Some(applet) => Some(load_applet(applet, &mut rx.io)?),
            None => None,
        };
        port.has_applet.store(loaded.is_some(), Ordering::Release);
        port.lends_tx.store(
            loaded.as_ref().is_some_and(Loaded::lends_tx),
            Ordering::Relaxed,
        );
        rx.applet = loaded;
        rx.traps_since_install = 0;
        rx.overruns_in_row = 0;
        port.throttle_until.store(0, Ordering::Relaxed);
        let left = (!rx.io.framer.out.is_empty())
            .then(|| std::mem::replace(&mut rx.io.framer.out, outbox()));
        drop(rx);
        if let Some(left) = left {
            self.pump_owned(left);
        }
        drop(tx);
        Ok(())
    }

    /// Sets endpoint `id`'s policy for applets that trap.
    pub fn set_trap_policy(&self, id: EndpointId, policy: TrapPolicy) -> Result<(), EngineError> {
        self.port_or_err(id)?.rx.lock().policy = policy;
        Ok(())
    }

    /// Runs `f` on endpoint `id`'s applet, if it has one (to set or read
    /// its fields, e.g. a ping-pong's round limit).
    pub fn with_applet<R>(
        &self,
        id: EndpointId,
        f: impl FnOnce(&mut jive::Applet) -> R,
    ) -> Option<R> {
        let port = self.port(id)?;
        let mut rx = port.rx.lock();
        rx.applet.as_mut().map(|l| f(&mut l.applet))
    }

    /// Whether endpoint `id` has an applet installed.
    pub fn has_applet(&self, id: EndpointId) -> bool {
        self.port(id)
            .is_some_and(|p| p.has_applet.load(Ordering::Acquire))
    }
}

/// What the engine needs to know of the bytes a filter loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Footprint {
    /// The end of the last byte any of its tests loads, with fields
    /// counted from the transport header taken at byte 34 (a 20-byte IPv4
    /// header, as in every frame the engine builds); `usize::MAX` when a
    /// test computes its value (`len`, arithmetic), which may read
    /// anything.
    pub(super) reach: usize,
    /// Whether every byte it loads is one that all frames of one channel of
    /// this engine share ([`per_channel_byte`]): then its verdict on such a
    /// frame is the same for every message sent on the channel.
    pub(super) per_channel: bool,
}

/// The footprints of the installed filters, and how many times the table
/// has changed (the versions [`Engine::publish_footprints`] hands out).
#[derive(Debug, Default)]
pub(super) struct Footprints {
    pub(super) of: std::collections::BTreeMap<dpf::FilterId, Footprint>,
    pub(super) changes: u64,
}

/// Whether byte `at` of a frame the engine builds for a channel is the same
/// for every message on it: a header byte other than the IPv4 total length
/// and header checksum and the UDP length and checksum, which follow the
/// message (the payload, from byte 54 on, is the message itself).
pub(super) fn per_channel_byte(at: usize) -> bool {
    const VARIES: [usize; 4] = [
        frame::IP_TOTAL_LEN,
        frame::IP_CSUM,
        frame::UDP_LEN,
        frame::UDP_CSUM,
    ];
    at < HEADER_LEN && !VARIES.iter().any(|&v| at == v || at == v + 1)
}

/// The footprint of `p` (see [`Footprint`]).
pub(super) fn program_footprint(p: &dpf::ir::Program) -> Footprint {
    let mut fp = Footprint {
        reach: 0,
        per_channel: true,
    };
    for n in &p.nodes {
        let dpf::ir::Node::Test { test, .. } = n else {
            continue;
        };
        let f = test.field;
        let start = match f.base {
            dpf::ir::Base::Link => 0,
            // The IHL byte (14) is read too, and is the same for every
            // frame the engine builds (0x45: the transport header at 34).
            dpf::ir::Base::Transport => 34,
            // A computed value (`len`, a field at a computed offset) may
            // depend on every byte: the whole frame.
            dpf::ir::Base::Value(_) => {
                return Footprint {
                    reach: usize::MAX,
                    per_channel: false,
                };
            }
        } + f.offset as usize;
        let end = start + f.size as usize;
        fp.reach = fp.reach.max(end.max(15));
        fp.per_channel &= (start..end).all(per_channel_byte);
    }
    fp
}

/// The first half of closing channel `tag` of `port` (under the control
/// lock): takes its filters out of the port and returns them, for the
/// caller to remove from the table, with other closings' in one change;
/// `None` when the channel is not open.
fn take_channel_filters(port: &Port, tag: u16) -> Option<Vec<dpf::FilterId>> {
    let mut filters = lock(&port.filters);
    let fids = filters.get_mut(usize::from(tag))?.as_mut()?;
    Some(std::mem::take(fids))
}

/// The second half, once the filters are out of the table: marks the
/// channel closed on both sides and tells the application through the
/// segment's count of closed channels.
fn mark_channel_closed(port: &Port, tag: u16) {
    lock(&port.closed_chans).push(tag);
    // Lock order: transmit side, then receive side.
    let mut tx = port.tx.lock();
    tx.framer.close_channel(tag);
    port.rx.lock().io.framer.close_channel(tag);
    drop(tx);
    port.seg.closed_channels().fetch_add(1, Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Endpoints created and removed by four threads at once, each built
    /// without the control lock in a slot reserved under it: every id
    /// handed out is new (a slot's generation moves on with each holder),
    /// each names the endpoint created, and at the end the engine holds
    /// exactly those not removed, the applet's among them.
    #[test]
    fn endpoints_built_at_once_each_get_a_slot_and_an_id_of_their_own() {
        let engine = super::super::datapath::tests::engine();
        let ids: Vec<Vec<(EndpointId, bool)>> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..4)
                .map(|t| {
                    let engine = &engine;
                    s.spawn(move || {
                        (0..150)
                            .map(|i| {
                                let applet = (i % 10 == 0).then_some(crate::applets::STANDARD);
                                let port = engine.create_port(Config::default(), applet).unwrap();
                                let id = port.id();
                                assert!(
                                    engine.port(id).is_some_and(|p| Arc::ptr_eq(&p, &port)),
                                    "endpoint {id} is the one created"
                                );
                                let keep = (i + t) % 3 == 0;
                                if !keep {
                                    engine.remove_port(id).unwrap();
                                }
                                (id, keep)
                            })
                            .collect()
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        let all: Vec<_> = ids.concat();
        let distinct: std::collections::HashSet<_> = all.iter().map(|&(id, _)| id).collect();
        assert_eq!(distinct.len(), all.len(), "an id was handed out twice");
        for &(id, keep) in &all {
            assert_eq!(engine.port(id).is_some(), keep, "endpoint {id}");
        }
        assert!(lock(&engine.inner.control).reserved.is_empty());
    }

    fn footprint(src: &str) -> Footprint {
        program_footprint(dpf::Table::prepare(src).expect("parses").program())
    }

    #[test]
    fn a_channel_filter_reads_only_bytes_its_channel_fixes() {
        let fp = footprint(
            "udp and src host 10.0.0.1 and udp src port 7000 and dst host 10.0.0.1 \
             and udp dst port 7000 and udp[8:2] = 1 and udp[10:2] = 2 \
             and udp[14:2] = 1 and udp[16:2] = 1",
        );
        assert_eq!(
            fp,
            Footprint {
                reach: 52,
                per_channel: true
            }
        );
    }

    #[test]
    fn lengths_checksums_payload_and_computed_values_vary_per_message() {
        for (src, reach) in [
            ("ip[2:2] = 100", 18),                               // IPv4 total length
            ("ip[10:2] = 0", 26),                                // IPv4 header checksum
            ("udp[4:2] = 20", 40),                               // UDP length
            ("udp[6:2] = 0", 42),                                // UDP checksum
            ("udp[20] = 7", 55),                                 // the first byte of the message
            ("ether[53:2] = 0", 55),                             // straddles header and message
            ("len > 100", usize::MAX),                           // the frame's length
            ("ip[2:2] - ((ip[0] & 0xf) << 2) > 40", usize::MAX), // arithmetic
        ] {
            assert_eq!(
                footprint(src),
                Footprint {
                    reach,
                    per_channel: false
                },
                "{src}"
            );
        }
    }

    #[test]
    fn header_fields_around_the_varying_ones_stay_per_channel() {
        for src in [
            "ip[0:2] = 0x4500", // version, IHL, type of service
            "ip[4:4] = 0x4000", // identification, flags, fragment offset
            "ip[8:2] = 0x4011", // time to live, protocol
            "ip[12:4] = 0",     // source address
            "udp[0:4] = 0",     // ports
            "ether[52:2] = 0",  // the last header field
        ] {
            assert!(footprint(src).per_channel, "{src}");
        }
    }
}
