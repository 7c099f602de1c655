//! dpf's tables lowered to eBPF, run in the kernel: for random tables and
//! frames, the XDP program (`BPF_PROG_TEST_RUN`) accepts exactly the frames
//! dpf's native classifier gives to some filter; a table that cannot be
//! lowered falls back to accepting every frame, with its reason; an
//! attached program follows installs and removals.
//!
//! The agreement with libpcap on the pcap-syntax subset is checked in
//! `libpcap_suite.rs`, which runs the same program beside dpf's other
//! classifiers.
//!
//! Every test needs root and bpf(2): without them it prints why and
//! passes, unless `UNET_REQUIRE_XDP=1`, when it fails.

mod common;

use common::{Gen, hex};
use dpf::Table;
use dpf::ebpf::{Fallback, OnAccept, Unlowerable, XdpFilter, XdpProgram};
use dpf::ir::{Base, Cmp, Field, Node, Op, Program, Size, Test};
use ebpf::xdp;
use rand::Rng;

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

/// Accepted frames return `XDP_TX`, so they differ from passed ones.
fn on_accept() -> OnAccept {
    OnAccept::Return(xdp::TX)
}

/// Checks the table's XDP program against its native classifier on
/// `frames` (those XDP can carry: 14 bytes or more); returns how many
/// were accepted.
fn agree(table: &Table, frames: &[Vec<u8>], what: &str) -> usize {
    let prog = XdpProgram::load(table.classifier().merged(), &on_accept()).unwrap();
    if let Some(why) = prog.fallback() {
        panic!("{what}: the table was not lowered: {why}");
    }
    let mut reader = table.reader();
    let mut accepted = 0;
    for f in frames.iter().filter(|f| f.len() >= 14) {
        let native = reader.classify(f).is_some();
        let out = prog.program().test_run(&ebpf::TestRun::new(f)).unwrap();
        assert!(
            out.verdict == xdp::TX || out.verdict == xdp::PASS,
            "{what}: verdict {} on {}",
            out.verdict,
            hex(f)
        );
        let kernel = out.verdict == xdp::TX;
        assert_eq!(
            kernel,
            native,
            "{what}: eBPF {kernel}, native {native} on {} bytes {}",
            f.len(),
            hex(f)
        );
        accepted += usize::from(native);
    }
    accepted
}

fn random_table(g: &mut Gen, n: usize) -> Table {
    let mut table = Table::new();
    let mut sources: Vec<(String, u32, i32)> = Vec::new();
    while sources.len() < n {
        let src = if !g.arith && g.rng.random_bool(0.6) {
            g.service()
        } else {
            g.filter()
        };
        // The arithmetic generator also writes what dpf refuses (a shift
        // by a constant of 32 or more); only what dpf accepts is tested.
        if dpf::compile(&src).is_ok() {
            let owner = sources.len() as u32;
            sources.push((src, owner, g.rng.random_range(0..4)));
        }
    }
    table
        .install_many(sources.iter().map(|(s, o, p)| (s.as_str(), *o, *p)))
        .unwrap();
    table
}

#[test]
fn random_tables_agree_with_the_native_classifier() {
    if !kernel("random_tables_agree_with_the_native_classifier") {
        return;
    }
    let mut g = Gen::new(0xeb9f);
    let mut accepted = 0;
    for (n, tables, frames) in [
        (1, 20, 300),
        (10, 5, 1000),
        (100, 2, 2000),
        (1000, 1, 2000),
        (10_000, 1, 1000),
    ] {
        for _ in 0..tables {
            let table = random_table(&mut g, n);
            let frames: Vec<Vec<u8>> = (0..frames).map(|_| g.packet()).collect();
            let a = agree(&table, &frames, &format!("{n} filters"));
            eprintln!("{n} filters: {a} of {} frames accepted", frames.len());
            accepted += a;
        }
    }
    assert!(
        accepted > 1000,
        "only {accepted} frames accepted: the test is nearly vacuous"
    );
}

#[test]
fn computed_values_agree_with_the_native_classifier() {
    if !kernel("computed_values_agree_with_the_native_classifier") {
        return;
    }
    // Arithmetic comparisons, `len`, `less`, `greater`: computed values
    // in residual programs.
    let mut g = Gen::new(0xa417);
    g.arith = true;
    let mut accepted = 0;
    for (n, tables, frames) in [(1, 40, 300), (5, 10, 1000), (40, 4, 1500)] {
        for _ in 0..tables {
            let table = random_table(&mut g, n);
            let frames: Vec<Vec<u8>> = (0..frames).map(|_| g.packet()).collect();
            accepted += agree(&table, &frames, &format!("{n} arithmetic filters"));
        }
    }
    assert!(
        accepted > 1000,
        "only {accepted} frames accepted: the test is nearly vacuous"
    );
}

#[test]
fn loads_the_verifier_cannot_bound_are_out_of_bounds_as_for_any_short_frame() {
    if !kernel("loads_the_verifier_cannot_bound_are_out_of_bounds_as_for_any_short_frame") {
        return;
    }
    for src in [
        "ether[65534:2] = 0",
        "not ether[65534:2] = 1",
        "tcp[65500] = 0 or udp",
        "ip[65400:4] = 0 or ether[0] = 2",
        "ip[ip[0] * 100] = 0",
        "ether[ether[12:2]] = 0 or arp",
    ] {
        let mut table = Table::new();
        table.install(src, 1, 0).unwrap();
        let mut g = Gen::new(src.len() as u64);
        let frames: Vec<Vec<u8>> = (0..500).map(|_| g.packet()).collect();
        agree(&table, &frames, src);
    }
}

/// A filter whose one computed value needs `depth` stack entries:
/// `1 + (1 + (1 + ...)) == depth`.
fn deep_value(depth: usize) -> Program {
    let mut ops: Vec<Op> = (0..depth).map(|_| Op::Const(1)).collect();
    ops.extend((1..depth).map(|_| Op::Add));
    Program {
        nodes: vec![
            Node::Reject,
            Node::Accept,
            Node::Test {
                test: Test {
                    field: Field {
                        base: Base::Value(0),
                        offset: 0,
                        size: Size::W,
                    },
                    mask: u32::MAX,
                    cmp: Cmp::Eq,
                    value: depth as u32,
                },
                then: 1,
                els: 0,
            },
        ],
        root: 2,
        values: vec![ops],
    }
}

#[test]
fn a_table_that_cannot_be_lowered_sends_every_frame_to_the_engine() {
    if !kernel("a_table_that_cannot_be_lowered_sends_every_frame_to_the_engine") {
        return;
    }
    let mut table = Table::new();
    table.install("udp dst port 53", 1, 0).unwrap();
    table.install_program(&deep_value(64), 2, 0).unwrap();
    let mut g = Gen::new(5);
    let frames: Vec<Vec<u8>> = (0..300).map(|_| g.packet()).collect();
    // 64 entries fit the stack: lowered, and exact.
    assert_eq!(
        agree(&table, &frames, "a 64-deep value"),
        frames.iter().filter(|f| f.len() >= 14).count()
    );

    table.install_program(&deep_value(65), 3, 0).unwrap();
    let prog = XdpProgram::load(table.classifier().merged(), &on_accept()).unwrap();
    match prog.fallback() {
        Some(Fallback::Lowering(Unlowerable::ValueTooDeep {
            depth: 65,
            limit: 64,
            ..
        })) => {}
        other => panic!(
            "expected a fallback for a 65-deep value, got {}",
            other.map_or("none".to_string(), |f| f.to_string())
        ),
    }
    let arp = {
        let mut f = vec![0u8; 60];
        f[12..14].copy_from_slice(&[8, 6]);
        f
    };
    assert!(
        prog.test_accepts(&arp).unwrap(),
        "the fallback accepts every frame"
    );
}

/// Runs `f` on a thread of its own in a new, empty network namespace.
fn in_new_netns<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(move || {
        // SAFETY: unshare(CLONE_NEWNET) moves only this thread into a new
        // network namespace; it touches no memory of the process.
        let r = unsafe { libc::unshare(libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "unshare: {}", std::io::Error::last_os_error());
        f()
    })
    .join()
    .unwrap()
}

#[test]
fn an_attached_filter_follows_installs_and_removals() {
    if !kernel("an_attached_filter_follows_installs_and_removals") {
        return;
    }
    in_new_netns(|| {
        let mut udp53 = vec![0u8; 60];
        udp53[12..14].copy_from_slice(&[8, 0]);
        udp53[14] = 0x45;
        udp53[23] = 17;
        udp53[36..38].copy_from_slice(&53u16.to_be_bytes());
        let mut tcp80 = udp53.clone();
        tcp80[23] = 6;
        tcp80[36..38].copy_from_slice(&80u16.to_be_bytes());

        let mut table = Table::new();
        let lo = ebpf::ifindex("lo").unwrap();
        let mut xf = XdpFilter::attach(&table, lo, ebpf::XdpMode::Skb, on_accept()).unwrap();
        let accepts = |xf: &XdpFilter, f: &[u8]| xf.current().test_accepts(f).unwrap();
        assert!(!accepts(&xf, &udp53), "an empty table accepts nothing");

        let dns = table.install("udp dst port 53", 1, 0).unwrap();
        xf.sync(&table).unwrap();
        assert!(accepts(&xf, &udp53) && !accepts(&xf, &tcp80));

        table.install("tcp dst port 80", 2, 0).unwrap();
        xf.sync(&table).unwrap();
        assert!(accepts(&xf, &udp53) && accepts(&xf, &tcp80));

        table.remove(dns).unwrap();
        xf.sync(&table).unwrap();
        assert!(!accepts(&xf, &udp53) && accepts(&xf, &tcp80));
        assert!(xf.current().fallback().is_none());
    });
}
