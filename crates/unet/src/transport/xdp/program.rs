//! The XDP program that feeds the `xdp` transport's sockets.
//!
//! Once the engine has filters, it is the engine's dpf table lowered to
//! eBPF (`dpf::ebpf`): a frame some installed filter accepts goes into the
//! socket of the queue it arrived on (`bpf_redirect_map(xsks,
//! ctx->rx_queue_index, XDP_PASS)`), every other frame to the kernel's
//! stack (`XDP_PASS`), so that ARP, ICMP, the host's other traffic and
//! unet frames no endpoint waits for stay with the kernel. Each change of
//! the table rebuilds it and swaps it in atomically with `BPF_LINK_UPDATE`
//! ([`Program::sync`]): every frame meets the old program or the new one.
//!
//! Before the first change, and whenever the table cannot be lowered (or
//! the verifier refuses it), the program is a fixed one: it admits every
//! frame the engine can take, unfragmented IPv4/UDP with a 20-byte header
//! to the transport's address and port (the `packet` transport's socket
//! filter, in eBPF), and passes the rest. Every load from the frame comes
//! after one bounds check of the whole header against `data_end` (the
//! verifier's rule), and there are no loops. Built with the `ebpf` crate's
//! assembler, loaded and attached through its bpf(2) wrapper (an
//! `XdpLink`, detached when dropped).

use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use ebpf::{Asm, Cond, Helper, Insn, Map, Reg, Src, Width, xdp, xdp_md};

use super::{XdpMissing, XdpMode};
use crate::frame::{Addr, ETH_TYPE, ETHERTYPE_IPV4, IP, IP_DST, IP_FRAG, IP_PROTO, IPPROTO_UDP};
use crate::frame::{IPV4_VERSION_IHL, UDP_DST_PORT};
use crate::transport::TransportError;

/// What the program does with a frame it admits.
#[derive(Copy, Clone, Debug)]
pub(super) enum OnMatch<'a> {
    /// Redirect it into the socket map, at the frame's receive queue.
    Redirect(&'a Map),
    /// Return this verdict (for test runs, where no socket exists).
    #[cfg_attr(not(test), allow(dead_code))]
    Verdict(u32),
}

/// The program's instructions for address `addr` (any destination address
/// when it is 0.0.0.0).
pub(super) fn admit_insns(addr: Addr, on_match: OnMatch<'_>) -> Vec<Insn> {
    // A 16- or 32-bit load reads the frame's bytes in the machine's order;
    // constants are compared in that order, with 32-bit compares so that
    // no sign extension of the immediate gets in the way.
    let h = |bytes: [u8; 2]| i32::from(u16::from_ne_bytes(bytes));
    let w = |bytes: [u8; 4]| i32::from_ne_bytes(bytes);
    let mut a = Asm::new();
    let pass = a.new_label();
    a.ldx(Width::W, Reg::R2, Reg::R1, xdp_md::DATA);
    a.ldx(Width::W, Reg::R3, Reg::R1, xdp_md::DATA_END);
    a.mov64(Reg::R4, Src::Reg(Reg::R2));
    a.alu64(ebpf::Alu::Add, Reg::R4, Src::Imm((UDP_DST_PORT + 2) as i32));
    a.jmp(Cond::Gt, Reg::R4, Src::Reg(Reg::R3), pass);
    a.ldx(Width::H, Reg::R5, Reg::R2, ETH_TYPE as i16);
    a.jmp32(
        Cond::Ne,
        Reg::R5,
        Src::Imm(h(ETHERTYPE_IPV4.to_be_bytes())),
        pass,
    );
    a.ldx(Width::B, Reg::R5, Reg::R2, IP as i16);
    a.jmp32(
        Cond::Ne,
        Reg::R5,
        Src::Imm(i32::from(IPV4_VERSION_IHL)),
        pass,
    );
    a.ldx(Width::B, Reg::R5, Reg::R2, IP_PROTO as i16);
    a.jmp32(Cond::Ne, Reg::R5, Src::Imm(i32::from(IPPROTO_UDP)), pass);
    // More fragments, or a fragment offset: not a whole datagram.
    a.ldx(Width::H, Reg::R5, Reg::R2, IP_FRAG as i16);
    a.jmp32(
        Cond::Set,
        Reg::R5,
        Src::Imm(h(0x3fffu16.to_be_bytes())),
        pass,
    );
    if !addr.ip.is_unspecified() {
        a.ldx(Width::W, Reg::R5, Reg::R2, IP_DST as i16);
        a.jmp32(Cond::Ne, Reg::R5, Src::Imm(w(addr.ip.octets())), pass);
    }
    a.ldx(Width::H, Reg::R5, Reg::R2, UDP_DST_PORT as i16);
    a.jmp32(
        Cond::Ne,
        Reg::R5,
        Src::Imm(h(addr.port.to_be_bytes())),
        pass,
    );
    match on_match {
        OnMatch::Redirect(xsks) => {
            a.ldx(Width::W, Reg::R2, Reg::R1, xdp_md::RX_QUEUE_INDEX);
            a.ld_map_fd(Reg::R1, std::os::fd::AsRawFd::as_raw_fd(&xsks.fd()));
            a.mov64(Reg::R3, Src::Imm(xdp::PASS as i32));
            a.call(Helper::REDIRECT_MAP);
            a.exit();
        }
        OnMatch::Verdict(v) => a.ret(v as i32),
    }
    a.bind(pass).expect("the label is bound once");
    a.ret(xdp::PASS as i32);
    a.finish()
        .expect("a fixed program of 30 instructions assembles")
}

/// How often the program was swapped, and how often a swap waited for the
/// old program's last runs (an RCU grace period); a handle that stays
/// readable after the transport has moved into an engine
/// ([`super::XdpTransport::program_counts`]).
#[derive(Clone, Debug, Default)]
pub struct ProgramCounts(Arc<[AtomicU64; 2]>);

impl ProgramCounts {
    /// Programs swapped in on the interface's link (`BPF_LINK_UPDATE`),
    /// one per change of the filter table the transport followed.
    pub fn swaps(&self) -> u64 {
        self.0[0].load(Ordering::Relaxed)
    }

    /// Waits for the old program's last runs (each an RCU grace period,
    /// milliseconds): one per swap that removed filters, however many.
    pub fn grace_periods(&self) -> u64 {
        self.0[1].load(Ordering::Relaxed)
    }
}

/// The socket map, the loaded program and its link on the interface;
/// dropping it detaches the program (the link goes first).
pub(super) struct Program {
    link: ebpf::XdpLink,
    /// The program attached now: the fixed one, or the table's.
    _prog: Attached,
    xsks: Arc<Map>,
    addr: Addr,
    mode: XdpMode,
    /// The version and filter count of the classifier the attached
    /// program was built from (`None`: the fixed program, before any).
    built_from: Option<(u64, usize)>,
    /// Why the table runs on the fixed program, if it does.
    fallback: Option<String>,
    counts: ProgramCounts,
    /// Programs are loaded with `BPF_F_XDP_HAS_FRAGS` (the sockets take
    /// multi-buffer frames).
    frags: bool,
}

/// Loads the fixed admitting program, frags-aware when `frags`.
fn load_fixed(addr: Addr, xsks: &Map, frags: bool) -> Result<ebpf::Program, ebpf::Error> {
    let insns = admit_insns(addr, OnMatch::Redirect(xsks));
    if frags {
        ebpf::Program::load_xdp_frags(&insns, "unet_admit")
    } else {
        ebpf::Program::load_xdp(&insns, "unet_admit")
    }
}

/// A loaded program kept alive while it is attached.
enum Attached {
    Fixed(ebpf::Program),
    Table(dpf::ebpf::XdpProgram),
}

/// What is missing, from a bpf(2) refusal's errno.
fn missing(e: &ebpf::Error) -> Option<XdpMissing> {
    match e.errno() {
        Some(libc::EPERM) | Some(libc::EACCES) => Some(XdpMissing::Privilege),
        Some(libc::ENOSYS) => Some(XdpMissing::Kernel),
        _ => None,
    }
}

impl Program {
    /// Makes the socket map with `sockets` (queue, socket) in it, loads
    /// the program for `addr` and attaches it to `ifindex` in the first of
    /// `order`'s modes ([`XdpMode::Driver`] or [`XdpMode::Generic`]) that
    /// the interface takes. Returns the program and, when an earlier mode
    /// of `order` was refused, that mode and the kernel's refusal.
    pub(super) fn attach(
        ifname: &str,
        ifindex: u32,
        addr: Addr,
        sockets: &[(u32, BorrowedFd<'_>)],
        order: &[XdpMode],
        frags: bool,
    ) -> Result<(Program, Option<(XdpMode, String)>), TransportError> {
        let fail = |what: String, e: ebpf::Error| match missing(&e) {
            Some(m) => TransportError::XdpUnavailable {
                ifname: ifname.to_string(),
                missing: m,
                source: std::io::Error::other(e.to_string()),
            },
            None => TransportError::Io {
                op: format!("{what} for {ifname}"),
                source: std::io::Error::other(e.to_string()),
            },
        };
        let queues = sockets.iter().map(|&(q, _)| q + 1).max().unwrap_or(1);
        let xsks = Arc::new(
            Map::xsk(queues, "unet_xsks")
                .map_err(|e| fail("create the socket map (XSKMAP)".into(), e))?,
        );
        for &(q, fd) in sockets {
            xsks.set_xsk(q, fd)
                .map_err(|e| fail(format!("put queue {q}'s socket in the map"), e))?;
        }
        let prog =
            load_fixed(addr, &xsks, frags).map_err(|e| fail("load the XDP program".into(), e))?;
        let mut refused = None;
        let mut last = None;
        for &m in order {
            let em = match m {
                XdpMode::Driver => ebpf::XdpMode::Driver,
                XdpMode::Generic => ebpf::XdpMode::Skb,
                // Not a mode of its own: the caller resolves it to an order.
                XdpMode::Auto => continue,
            };
            match ebpf::XdpLink::attach(&prog, ifindex, em) {
                Ok(link) => {
                    let program = Program {
                        link,
                        _prog: Attached::Fixed(prog),
                        xsks,
                        addr,
                        mode: m,
                        built_from: None,
                        fallback: None,
                        counts: ProgramCounts::default(),
                        frags,
                    };
                    return Ok((program, refused));
                }
                Err(e) => {
                    if refused.is_none() {
                        refused = Some((m, e.to_string()));
                    }
                    last = Some((m, e));
                }
            }
        }
        let Some((m, e)) = last else {
            return Err(TransportError::Config {
                kind: "xdp",
                what: format!("no attach mode to try on {ifname}"),
            });
        };
        Err(match missing(&e) {
            Some(mi) => TransportError::XdpUnavailable {
                ifname: ifname.to_string(),
                missing: mi,
                source: std::io::Error::other(e.to_string()),
            },
            None => TransportError::XdpUnavailable {
                ifname: ifname.to_string(),
                missing: XdpMissing::Driver,
                source: std::io::Error::other(format!("attach in {m} mode: {e}")),
            },
        })
    }

    /// Where the program runs.
    pub(super) fn mode(&self) -> XdpMode {
        self.mode
    }

    /// Why the engine's table runs on the fixed admitting program rather
    /// than its own lowering, if it does.
    pub(super) fn fallback(&self) -> Option<&str> {
        self.fallback.as_deref()
    }

    /// The swap counts' handle.
    pub(super) fn counts(&self) -> &ProgramCounts {
        &self.counts
    }

    /// Rebuilds the program from `classifier` and swaps it in atomically,
    /// unless it was built from that version already. When the table lost
    /// a filter, also waits until no run of the old program is left in
    /// the kernel (see [`super::sys::wait_for_program_runs`]), so that
    /// once this returns no frame the old program admitted is still on
    /// its way to a socket. On error the attached program stays.
    pub(super) fn sync(&mut self, classifier: &dpf::Classifier) -> Result<(), ebpf::Error> {
        let filters = classifier.len();
        let version = classifier.version();
        if self.built_from.is_some_and(|(v, _)| v == version) {
            return Ok(());
        }
        let on_accept = dpf::ebpf::OnAccept::Redirect(self.xsks.clone());
        let table = dpf::ebpf::XdpProgram::load_with(classifier.merged(), &on_accept, self.frags)?;
        let (next, fallback) = match table.fallback() {
            None => (Attached::Table(table), None),
            // The every-frame program would take ARP and the host's own
            // traffic from the kernel: admit what the engine can take.
            Some(why) => {
                let fixed = load_fixed(self.addr, &self.xsks, self.frags)?;
                (Attached::Fixed(fixed), Some(why.to_string()))
            }
        };
        self.link.update(match &next {
            Attached::Fixed(p) => p,
            Attached::Table(t) => t.program(),
        })?;
        self.counts.0[0].fetch_add(1, Ordering::Relaxed);
        let shrank = self.built_from.is_none_or(|(_, n)| filters < n);
        self._prog = next;
        self.built_from = Some((version, filters));
        self.fallback = fallback;
        if shrank {
            super::sys::wait_for_program_runs();
            self.counts.0[1].fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{FrameHeader, HEADER_LEN};

    /// The program, run in the kernel (`BPF_PROG_TEST_RUN`) with a
    /// verdict in place of the redirect: unet frames to the address and
    /// port are admitted, everything else passes to the stack. Skipped
    /// (with the reason printed) where bpf(2) is unusable, unless
    /// `UNET_REQUIRE_XDP=1`.
    #[test]
    fn the_program_admits_the_engines_frames_and_passes_the_rest() {
        if let Err(why) = ebpf::probe() {
            if std::env::var(super::super::REQUIRE_ENV).as_deref() == Ok("1") {
                panic!("bpf(2) is unusable: {why}");
            }
            eprintln!("SKIP the_program_admits_the_engines_frames_and_passes_the_rest: {why}");
            return;
        }
        let me: Addr = "10.77.1.1:7000".parse().unwrap();
        let peer: Addr = "10.77.1.2:7001".parse().unwrap();
        const ADMIT: u32 = xdp::TX; // any verdict but PASS
        let run =
            |prog: &ebpf::Program, f: &[u8]| prog.test_run(&ebpf::TestRun::new(f)).unwrap().verdict;
        let mut f = vec![0u8; HEADER_LEN + 4];
        FrameHeader::new(peer, me, 1, 2).write(4, &mut f).unwrap();
        for to in [me, Addr::new(std::net::Ipv4Addr::UNSPECIFIED, 7000)] {
            let insns = admit_insns(to, OnMatch::Verdict(ADMIT));
            let prog = ebpf::Program::load_xdp(&insns, "unet_admit_test").unwrap();
            assert_eq!(run(&prog, &f), ADMIT, "a unet frame to {to}");
            let mut other_port = f.clone();
            other_port[UDP_DST_PORT + 1] ^= 1;
            let mut tcp = f.clone();
            tcp[IP_PROTO] = 6;
            let mut arp = f.clone();
            arp[ETH_TYPE + 1] = 0x06;
            let mut frag = f.clone();
            frag[IP_FRAG + 1] = 1;
            let mut more_frags = f.clone();
            more_frags[IP_FRAG] |= 0x20;
            let mut options = f.clone();
            options[IP] = 0x46;
            for (what, g) in [
                ("another port", &other_port),
                ("TCP", &tcp),
                ("ARP", &arp),
                ("a fragment", &frag),
                ("a first fragment", &more_frags),
                ("IP options", &options),
                (
                    "a frame cut before the port",
                    &f[..UDP_DST_PORT + 1].to_vec(),
                ),
            ] {
                assert_eq!(run(&prog, g), xdp::PASS, "{what}");
            }
            // Don't-fragment is not fragmentation.
            let mut df = f.clone();
            df[IP_FRAG] = 0x40;
            assert_eq!(run(&prog, &df), ADMIT);
        }
        let mut other_host = f.clone();
        other_host[IP_DST + 3] = 9;
        let prog =
            ebpf::Program::load_xdp(&admit_insns(me, OnMatch::Verdict(ADMIT)), "unet_admit_test")
                .unwrap();
        assert_eq!(run(&prog, &other_host), xdp::PASS);
        // A high first octet, whose word has its sign bit set.
        let far: Addr = "200.1.2.3:7000".parse().unwrap();
        let mut g = vec![0u8; HEADER_LEN + 4];
        FrameHeader::new(peer, far, 1, 2).write(4, &mut g).unwrap();
        let prog = ebpf::Program::load_xdp(
            &admit_insns(far, OnMatch::Verdict(ADMIT)),
            "unet_admit_test",
        )
        .unwrap();
        assert_eq!(run(&prog, &g), ADMIT);
    }
}
