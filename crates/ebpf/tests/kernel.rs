//! The kernel interface against the running kernel: maps, program load and
//! the verifier's refusal, `BPF_PROG_TEST_RUN`, XDP links.
//!
//! Each test needs root and bpf(2); without them it prints why and
//! passes, unless `UNET_REQUIRE_XDP=1`, when it fails.

use ebpf::{
    Alu, Asm, Cond, Error, Map, MapType, Program, Reg, Src, TestRun, Update, Width, XdpLink,
    XdpMode, xdp, xdp_md,
};

fn kernel(test: &str) -> bool {
    match ebpf::probe() {
        Ok(()) => true,
        Err(why) => {
            if std::env::var("UNET_REQUIRE_XDP").as_deref() == Ok("1") {
                panic!("{test}: UNET_REQUIRE_XDP=1 but bpf(2) is unusable: {why}");
            }
            println!("skipping {test}: {why}");
            false
        }
    }
}

/// XDP: `DROP` for IPv4 frames (EtherType 0x0800), else `PASS`, with the
/// bounds check the verifier demands before the two-byte load.
fn drop_ipv4() -> Vec<ebpf::Insn> {
    let mut a = Asm::new();
    let pass = a.new_label();
    a.ldx(Width::W, Reg::R2, Reg::R1, xdp_md::DATA);
    a.ldx(Width::W, Reg::R3, Reg::R1, xdp_md::DATA_END);
    a.mov64(Reg::R4, Src::Reg(Reg::R2));
    a.alu64(Alu::Add, Reg::R4, Src::Imm(14));
    a.jmp(Cond::Gt, Reg::R4, Src::Reg(Reg::R3), pass);
    a.ldx(Width::H, Reg::R5, Reg::R2, 12);
    a.be(Reg::R5, 16);
    a.jmp(Cond::Ne, Reg::R5, Src::Imm(0x0800), pass);
    a.ret(xdp::DROP as i32);
    a.bind(pass).unwrap();
    a.ret(xdp::PASS as i32);
    a.finish().unwrap()
}

fn frame(ethertype: u16, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[12..14].copy_from_slice(&ethertype.to_be_bytes());
    f
}

#[test]
fn a_loaded_program_classifies_frames_in_a_test_run() {
    if !kernel("a_loaded_program_classifies_frames_in_a_test_run") {
        return;
    }
    let p = Program::load_xdp(&drop_ipv4(), "drop_ipv4").unwrap();
    let ipv4 = frame(0x0800, 60);
    let arp = frame(0x0806, 60);
    let out = p.test_run(&TestRun::new(&ipv4)).unwrap();
    assert_eq!(out.verdict, xdp::DROP);
    assert_eq!(out.packet, ipv4, "the program leaves the frame as it was");
    assert_eq!(p.test_run(&TestRun::new(&arp)).unwrap().verdict, xdp::PASS);
    let timed = p.test_run(&TestRun::new(&ipv4).repeat(1000)).unwrap();
    assert_eq!(timed.verdict, xdp::DROP);
    assert!(
        timed.mean.as_nanos() < 1_000_000,
        "one run under a millisecond"
    );
}

#[test]
fn a_short_frame_is_refused_before_the_kernel_sees_it() {
    if !kernel("a_short_frame_is_refused_before_the_kernel_sees_it") {
        return;
    }
    let p = Program::load_xdp(&drop_ipv4(), "drop_ipv4").unwrap();
    assert!(matches!(
        p.test_run(&TestRun::new(&[0u8; 13])),
        Err(Error::ShortPacket { len: 13 })
    ));
}

#[test]
fn the_verifier_log_comes_back_with_its_refusal() {
    if !kernel("the_verifier_log_comes_back_with_its_refusal") {
        return;
    }
    // A packet load with no bounds check before it.
    let mut a = Asm::new();
    a.ldx(Width::W, Reg::R2, Reg::R1, xdp_md::DATA);
    a.ldx(Width::B, Reg::R0, Reg::R2, 12);
    a.exit();
    let err = Program::load_xdp(&a.finish().unwrap(), "unchecked").unwrap_err();
    match &err {
        Error::Verifier { name, errno, log } => {
            assert_eq!(name, "unchecked");
            assert_eq!(*errno, libc::EACCES);
            assert!(log.contains("invalid access to packet"), "log: {log}");
        }
        other => panic!("expected a verifier refusal, got: {other}"),
    }
    assert!(err.to_string().contains("invalid access to packet"));
}

#[test]
fn maps_store_look_up_and_delete() {
    if !kernel("maps_store_look_up_and_delete") {
        return;
    }
    let h = Map::hash(4, 8, 16, "h").unwrap();
    assert_eq!(h.kind(), MapType::Hash);
    assert_eq!(h.lookup(&7u32.to_ne_bytes()).unwrap(), None);
    h.update(
        &7u32.to_ne_bytes(),
        &[1, 2, 3, 4, 5, 6, 7, 8],
        Update::NoExist,
    )
    .unwrap();
    assert_eq!(
        h.lookup(&7u32.to_ne_bytes()).unwrap(),
        Some(vec![1, 2, 3, 4, 5, 6, 7, 8])
    );
    let again = h
        .update(&7u32.to_ne_bytes(), &[0; 8], Update::NoExist)
        .unwrap_err();
    assert_eq!(again.errno(), Some(libc::EEXIST));
    assert!(h.delete(&7u32.to_ne_bytes()).unwrap());
    assert!(!h.delete(&7u32.to_ne_bytes()).unwrap());
    assert!(matches!(
        h.update(&[0; 3], &[0; 8], Update::Any),
        Err(Error::Size {
            what: "key",
            got: 3,
            want: 4,
            ..
        })
    ));

    let a = Map::array(4, 2, "a").unwrap();
    assert_eq!(a.lookup(&1u32.to_ne_bytes()).unwrap(), Some(vec![0; 4]));
    a.update(&1u32.to_ne_bytes(), &9u32.to_ne_bytes(), Update::Any)
        .unwrap();
    assert_eq!(
        a.lookup(&1u32.to_ne_bytes()).unwrap(),
        Some(9u32.to_ne_bytes().to_vec())
    );
    let past = a
        .update(&2u32.to_ne_bytes(), &[0; 4], Update::Any)
        .unwrap_err();
    assert_eq!(past.errno(), Some(libc::E2BIG));
}

#[test]
fn a_program_reads_a_map_through_its_fd() {
    if !kernel("a_program_reads_a_map_through_its_fd") {
        return;
    }
    // return verdicts[0], or ABORTED when the lookup fails.
    let verdicts = Map::array(4, 1, "verdicts").unwrap();
    let mut a = Asm::new();
    let missing = a.new_label();
    a.st(Width::W, Reg::R10, -4, 0);
    a.mov64(Reg::R2, Src::Reg(Reg::R10));
    a.alu64(Alu::Add, Reg::R2, Src::Imm(-4));
    a.ld_map_fd(Reg::R1, std::os::fd::AsRawFd::as_raw_fd(&verdicts.fd()));
    a.call(ebpf::Helper::MAP_LOOKUP_ELEM);
    a.jmp(Cond::Eq, Reg::R0, Src::Imm(0), missing);
    a.ldx(Width::W, Reg::R0, Reg::R0, 0);
    a.exit();
    a.bind(missing).unwrap();
    a.ret(xdp::ABORTED as i32);
    let p = Program::load_xdp(&a.finish().unwrap(), "from_map").unwrap();
    let f = frame(0x0800, 60);
    for v in [xdp::PASS, xdp::DROP, xdp::TX] {
        verdicts
            .update(&0u32.to_ne_bytes(), &v.to_ne_bytes(), Update::Any)
            .unwrap();
        assert_eq!(p.test_run(&TestRun::new(&f)).unwrap().verdict, v);
    }
}

#[test]
fn the_xsk_redirect_program_passes_frames_of_queues_without_a_socket() {
    if !kernel("the_xsk_redirect_program_passes_frames_of_queues_without_a_socket") {
        return;
    }
    let xsks = Map::xsk(4, "xsks").unwrap();
    let p = ebpf::xsk_redirect(&xsks).unwrap();
    assert_eq!(p.len(), 6);
    let out = p.test_run(&TestRun::new(&frame(0x0800, 64))).unwrap();
    assert_eq!(out.verdict, xdp::PASS);
    // Only AF_XDP sockets go into an XSKMAP.
    let not_a_socket = std::fs::File::open("/dev/null").unwrap();
    let err = xsks
        .set_xsk(0, std::os::fd::AsFd::as_fd(&not_a_socket))
        .unwrap_err();
    assert!(err.errno().is_some(), "{err}");
}

/// Runs `f` on a thread of its own in a new, empty network namespace (its
/// loopback is the only interface), so no real interface is touched.
fn in_new_netns<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(move || {
        // SAFETY: unshare(CLONE_NEWNET) moves only this thread into a new
        // network namespace; it touches no memory of the process.
        let r = unsafe { libc::unshare(libc::CLONE_NEWNET) };
        assert_eq!(
            r,
            0,
            "unshare(CLONE_NEWNET): {}",
            std::io::Error::last_os_error()
        );
        f()
    })
    .join()
    .unwrap()
}

#[test]
fn an_xdp_link_attaches_replaces_atomically_and_detaches_on_drop() {
    if !kernel("an_xdp_link_attaches_replaces_atomically_and_detaches_on_drop") {
        return;
    }
    in_new_netns(|| {
        let lo = ebpf::ifindex("lo").unwrap();
        let first = Program::load_xdp(&drop_ipv4(), "first").unwrap();
        let mut a = Asm::new();
        a.ret(xdp::PASS as i32);
        let second = Program::load_xdp(&a.finish().unwrap(), "second").unwrap();

        let link = XdpLink::attach(&first, lo, XdpMode::Skb).unwrap();
        assert_eq!((link.ifindex(), link.mode()), (lo, XdpMode::Skb));
        // One XDP program per interface and mode: a second link is refused.
        let busy = XdpLink::attach(&second, lo, XdpMode::Skb).unwrap_err();
        assert_eq!(busy.errno(), Some(libc::EBUSY), "{busy}");

        link.replace(&first, &second).unwrap();
        // `first` is no longer attached, so a compare-and-swap from it fails.
        let stale = link.replace(&first, &second).unwrap_err();
        assert_eq!(stale.errno(), Some(libc::EPERM), "{stale}");
        link.update(&first).unwrap();

        drop(link);
        // Detached: a new link can take the interface.
        XdpLink::attach(&second, lo, XdpMode::Skb).unwrap();
    });
}

#[test]
fn an_unknown_interface_is_named_in_the_error() {
    let err = ebpf::ifindex("no-such-if0").unwrap_err();
    assert!(err.to_string().contains("no-such-if0"), "{err}");
}

#[test]
fn jumps_farther_than_the_16_bit_offset_run_in_the_kernel() {
    if !kernel("jumps_farther_than_the_16_bit_offset_run_in_the_kernel") {
        return;
    }
    // if ethertype == IPv4 goto drop (40,000 instructions away), else pass
    // after running through them.
    let mut a = Asm::new();
    let (pass, drop) = (a.new_label(), a.new_label());
    a.ldx(Width::W, Reg::R2, Reg::R1, xdp_md::DATA);
    a.ldx(Width::W, Reg::R3, Reg::R1, xdp_md::DATA_END);
    a.mov64(Reg::R4, Src::Reg(Reg::R2));
    a.alu64(Alu::Add, Reg::R4, Src::Imm(14));
    a.jmp(Cond::Gt, Reg::R4, Src::Reg(Reg::R3), pass);
    a.ldx(Width::H, Reg::R5, Reg::R2, 12);
    a.be(Reg::R5, 16);
    a.jmp(Cond::Eq, Reg::R5, Src::Imm(0x0800), drop);
    for _ in 0..40_000 {
        a.mov64(Reg::R0, Src::Imm(0));
    }
    a.ja(pass);
    a.bind(drop).unwrap();
    a.ret(xdp::DROP as i32);
    a.bind(pass).unwrap();
    a.ret(xdp::PASS as i32);
    let p = Program::load_xdp(&a.finish().unwrap(), "far").unwrap();
    let run = |t| p.test_run(&TestRun::new(&frame(t, 60))).unwrap().verdict;
    assert_eq!(run(0x0800), xdp::DROP);
    assert_eq!(run(0x86dd), xdp::PASS);
}

/// A program loaded with `BPF_F_XDP_HAS_FRAGS` passes the verifier and
/// says so, and runs on a frame larger than a page (which the kernel's
/// test run builds as a multi-buffer frame, the program's packet pointers
/// covering the first buffer).
#[test]
fn a_frags_program_takes_frames_larger_than_a_page() {
    if !kernel("a_frags_program_takes_frames_larger_than_a_page") {
        return;
    }
    let plain = Program::load_xdp(&drop_ipv4(), "drop_ipv4").unwrap();
    let frags = Program::load_xdp_frags(&drop_ipv4(), "drop_ipv4_mb").unwrap();
    assert!(frags.has_frags() && !plain.has_frags());
    let out = frags.test_run(&TestRun::new(&frame(0x0800, 9000))).unwrap();
    assert_eq!(out.verdict, xdp::DROP);
    let arp = frame(0x0806, 60);
    assert_eq!(
        frags.test_run(&TestRun::new(&arp)).unwrap().verdict,
        xdp::PASS
    );
}
