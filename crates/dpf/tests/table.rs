//! The filter table as a specification: for tables of 1 to 10,000 filters,
//! the merged classifier (native, and its reference evaluator) picks the
//! same owner as evaluating each filter alone in priority order; installs
//! and removals at run time keep that true; bad input changes nothing; and
//! a thread classifying while the table changes sees the old table or the
//! new one, never anything else.

mod common;

use common::{Gen, hex};
use dpf::ir::Program;
use dpf::{FilterId, Reader, Table};
use rand::Rng;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The table as a list, in installation order: (id, owner, priority, program).
type Model = Vec<(FilterId, u32, i32, Program)>;

/// The owner the table must return: the first match in priority order
/// (descending), ties broken by installation order.
fn expected(model: &Model, pkt: &[u8]) -> Option<u32> {
    let mut order: Vec<&(FilterId, u32, i32, Program)> = model.iter().collect();
    order.sort_by_key(|f| std::cmp::Reverse(f.2));
    order.iter().find(|f| f.3.matches(pkt)).map(|f| f.1)
}

fn check(table: &Table, reader: &mut Reader, model: &Model, pkt: &[u8], what: &str) {
    let want = expected(model, pkt);
    let c = table.classifier();
    let native = reader.classify(pkt);
    let reference = c.classify_reference(pkt);
    assert_eq!(
        (native, reference),
        (want, want),
        "{what}: packet {} (native, merged reference) vs each filter alone",
        hex(pkt)
    );
}

fn random_table(g: &mut Gen, n: usize) -> (Table, Model) {
    let mut table = Table::new();
    let mut model = Model::new();
    let mut sources = Vec::new();
    for owner in 0..n as u32 {
        let src = if g.rng.random_bool(0.6) {
            g.service()
        } else {
            g.filter()
        };
        let prio = g.rng.random_range(0..4);
        sources.push((src, owner, prio));
    }
    // Large tables are built in one batch; small ones one filter at a time.
    if n > 200 {
        let ids = table
            .install_many(sources.iter().map(|(s, o, p)| (s.as_str(), *o, *p)))
            .unwrap();
        for ((src, owner, prio), id) in sources.iter().zip(ids) {
            model.push((id, *owner, *prio, dpf::compile(src).unwrap()));
        }
    } else {
        for (src, owner, prio) in &sources {
            let id = table.install(src, *owner, *prio).unwrap();
            model.push((id, *owner, *prio, dpf::compile(src).unwrap()));
        }
    }
    (table, model)
}

#[test]
fn merged_tables_of_1_to_10000_filters_agree_with_each_filter_alone() {
    let mut g = Gen::new(0xd9f);
    for (n, packets) in [
        (1, 3000),
        (10, 3000),
        (100, 2000),
        (1000, 1000),
        (10_000, 300),
    ] {
        let (table, model) = random_table(&mut g, n);
        let stats = table.classifier().merged().stats();
        let mut reader = table.reader();
        let mut matched = 0;
        for _ in 0..packets {
            let pkt = g.packet();
            matched += expected(&model, &pkt).is_some() as usize;
            check(&table, &mut reader, &model, &pkt, &format!("{n} filters"));
        }
        eprintln!("{n} filters: {stats:?}; {matched}/{packets} packets matched");
        assert!(
            matched > 0,
            "{n} filters: no packet matched, the test is vacuous"
        );
    }
}

/// The endpoint filter `i` of a table as a tcpdump user fills it, in a
/// cycle of classes that each become one dispatch of many arms: value
/// tables (dense and sparse keys), one residual shared by every arm
/// (`vlan V`), a transport test behind an address, one-port ranges among
/// ports.
fn endpoint(i: usize) -> String {
    let j = i / 8;
    let (hi, lo) = (j >> 8, j & 0xff);
    let port = 1000 + 3 * i;
    match i % 8 {
        0 => format!("tcp dst port {port} and dst host 10.0.0.1"),
        1 => format!("tcp dst portrange {port} and dst host 10.0.0.1"),
        2 => format!("udp dst port {port} and dst net 10.1"),
        3 => format!("ip6 proto \\tcp and dst port {port}"),
        4 => format!("ether dst 02:00:5e:00:{hi:02x}:{lo:02x}"),
        5 => format!("vlan {}", 1 + j % 4094),
        6 => format!("ether proto \\arp and arp dst host 10.2.{hi}.{lo}"),
        _ => format!("tcp dst port http and dst host 10.3.{hi}.{lo}"),
    }
}

/// A frame close to endpoint filter `i`'s: its own, or one field off.
fn endpoint_frame(g: &mut Gen, i: usize) -> Vec<u8> {
    let j = i / 8;
    let (hi, lo) = ((j >> 8) as u8, j as u8);
    let port = (1000 + 3 * i) as u16 + g.rng.random_range(0..2u16);
    let mut p = vec![0u8; 78];
    p[..6].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    let ipv4 = |p: &mut [u8], dst: [u8; 4], proto: u8, port: u16| {
        p[12..14].copy_from_slice(&[8, 0]);
        p[14] = 0x45;
        p[23] = proto;
        p[30..34].copy_from_slice(&dst);
        p[36..38].copy_from_slice(&port.to_be_bytes());
    };
    match i % 8 {
        0 | 1 => ipv4(&mut p, [10, 0, 0, 1], 6, port),
        2 => ipv4(&mut p, [10, 1, hi, lo], 17, port),
        3 => {
            p[12..14].copy_from_slice(&[0x86, 0xdd]);
            p[20] = 6;
            p[56..58].copy_from_slice(&port.to_be_bytes());
        }
        4 => {
            p[..6].copy_from_slice(&[2, 0, 0x5e, 0, hi, lo.wrapping_add(port as u8 & 1)]);
            ipv4(&mut p, [10, 9, 9, 9], 6, 9);
        }
        5 => {
            let tpid = [0x8100u16, 0x88a8, 0x9100, 0x0800][g.rng.random_range(0..4)];
            p[12..14].copy_from_slice(&tpid.to_be_bytes());
            let vid = 1 + (j % 4094) as u16 + (port & 1);
            p[14..16].copy_from_slice(&vid.to_be_bytes());
        }
        6 => {
            p[12..14].copy_from_slice(&[8, 6]);
            p[38..42].copy_from_slice(&[10, 2, hi, lo.wrapping_add(port as u8 & 1)]);
        }
        _ => ipv4(&mut p, [10, 3, hi, lo], 6, 80 + (port & 1)),
    }
    if g.rng.random_bool(0.1) {
        p[0] |= 1;
    }
    let cut = [78, 78, 78, 57, 42, 38, 37, 16, 15, 14, 6][g.rng.random_range(0..11)];
    p.truncate(cut);
    p
}

#[test]
fn endpoint_tables_with_catch_alls_agree_with_each_filter_alone() {
    let mut g = Gen::new(0xe9d);
    for n in [9, 200, 2000] {
        let mut sources: Vec<(String, u32, i32)> =
            (0..n).map(|i| (endpoint(i), i as u32, 0)).collect();
        // Catch-alls with no atom, ranked below everything (tested at the
        // end of the root's chain) and, once, above it.
        for (k, src) in [
            "multicast",
            "tcp dst portrange 6000-6063",
            "icmp6",
            "ether proto \\arp",
        ]
        .iter()
        .enumerate()
        {
            sources.push((src.to_string(), (n + k) as u32, 0));
        }
        sources.push((
            "ether[0] & 1 != 0 and vlan".into(),
            99_999,
            if n == 200 { 1 } else { -1 },
        ));
        let mut table = Table::new();
        let ids = table
            .install_many(sources.iter().map(|(s, o, p)| (s.as_str(), *o, *p)))
            .unwrap();
        let model: Model = sources
            .iter()
            .zip(ids)
            .map(|((s, o, p), id)| (id, *o, *p, dpf::compile(s).unwrap()))
            .collect();
        let mut reader = table.reader();
        let mut matched = 0;
        for _ in 0..1500 {
            let i = g.rng.random_range(0..n);
            let pkt = endpoint_frame(&mut g, i);
            matched += expected(&model, &pkt).is_some() as usize;
            check(
                &table,
                &mut reader,
                &model,
                &pkt,
                &format!("{n} endpoint filters"),
            );
        }
        assert!(
            matched > 300,
            "{n} endpoint filters: only {matched} frames matched"
        );
    }
}

#[test]
fn installs_and_removals_keep_the_classifier_exact() {
    let mut g = Gen::new(7);
    let mut table = Table::new();
    let mut reader = table.reader();
    let mut model = Model::new();
    let packets: Vec<Vec<u8>> = (0..200).map(|_| g.packet()).collect();
    for step in 0..300 {
        if model.is_empty() || g.rng.random_bool(0.65) {
            let src = if g.rng.random_bool(0.5) {
                g.service()
            } else {
                g.filter()
            };
            let (owner, prio) = (g.rng.random_range(0..50), g.rng.random_range(-2..3));
            let id = table.install(&src, owner, prio).unwrap();
            model.push((id, owner, prio, dpf::compile(&src).unwrap()));
        } else {
            let i = g.rng.random_range(0..model.len());
            let (id, ..) = model.remove(i);
            table.remove(id).unwrap();
        }
        assert_eq!(table.len(), model.len());
        for pkt in packets.iter().skip(step % 7).step_by(7) {
            check(&table, &mut reader, &model, pkt, &format!("step {step}"));
        }
    }
}

#[test]
fn bad_input_leaves_the_table_as_it_was() {
    let mut table = Table::new();
    let id = table.install("tcp dst port 80", 1, 0).unwrap();
    let mut pkt = vec![0u8; 54];
    pkt[12] = 0x08;
    pkt[14] = 0x45;
    pkt[23] = 6;
    pkt[37] = 80;
    let mut reader = table.reader();
    let before = table.classifier();
    for bad in [
        "tcp dst port",
        "tcp and (udp",
        "ip[1:3] = 1",
        "host nosuchhost",
        "",
    ] {
        assert!(table.install(bad, 2, 9).is_err(), "{bad:?} was accepted");
        assert_eq!(table.len(), 1);
        assert!(
            Arc::ptr_eq(&before, &table.classifier()),
            "{bad:?} republished"
        );
        assert_eq!(reader.classify(&pkt), Some(1));
    }
    let batch = table.install_many([("udp", 3, 0), ("tcp and (", 4, 0)]);
    assert!(batch.is_err());
    assert_eq!(
        table.len(),
        1,
        "a failed batch installs none of its filters"
    );
    assert!(matches!(
        table.remove(FilterId(id.0 + 100)),
        Err(dpf::Error::UnknownFilter { .. })
    ));
    table.remove(id).unwrap();
    assert!(matches!(
        table.remove(id),
        Err(dpf::Error::UnknownFilter { .. })
    ));
    assert_eq!(reader.classify(&pkt), None);
    assert_eq!(table.classifier().version(), before.version() + 1);
}

#[test]
fn a_reader_sees_the_old_table_or_the_new_one() {
    let mut table = Table::new();
    table.install("tcp", 1, 0).unwrap();
    let mut pkt = vec![0u8; 54];
    pkt[12] = 0x08;
    pkt[14] = 0x45;
    pkt[23] = 6;
    pkt[37] = 80;
    let stop = Arc::new(AtomicBool::new(false));
    // Readers that have classified once: the replacements start only when
    // both run, so that they overlap the readers however the threads are
    // scheduled (otherwise the writer may finish before a reader starts).
    let running = Arc::new(AtomicUsize::new(0));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (mut reader, stop, pkt) = (table.reader(), Arc::clone(&stop), pkt.clone());
            let running = Arc::clone(&running);
            std::thread::spawn(move || {
                let mut seen = [0u64; 3];
                let mut first = true;
                while first || !stop.load(Ordering::Relaxed) {
                    match reader.classify(&pkt) {
                        Some(o @ (1 | 2)) => seen[o as usize] += 1,
                        other => panic!("a reader saw {other:?}: neither table"),
                    }
                    if first {
                        running.fetch_add(1, Ordering::Release);
                        first = false;
                    }
                }
                seen
            })
        })
        .collect();
    // (A reader that panicked at once has finished: its join reports it.)
    while running.load(Ordering::Acquire) < 2 && !readers.iter().any(|r| r.is_finished()) {
        std::thread::yield_now();
    }
    for i in 0..400 {
        let id = table
            .install(&format!("tcp dst port {}", 80 + i % 2), 2, 5)
            .unwrap();
        table.remove(id).unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        let seen = r.join().unwrap();
        assert!(seen[1] > 0, "the reader never ran: {seen:?}");
    }
    // The readers have exited (a synchronization point each): every
    // replaced classifier is freed, only the current one is live.
    let stats = table.cache().stats();
    assert_eq!(stats.bytes_pending, 0, "{stats:?}");
    assert_eq!(stats.entries, 1, "{stats:?}");
}
