//! The filter table as a specification: for tables of 1 to 10,000 filters,
//! the merged classifier (native, and its reference evaluator) picks the
//! same owner as evaluating each filter alone in priority order; installs
//! and removals at run time keep that true; bad input changes nothing; and
//! a thread classifying while the table changes sees the old table or the
//! new one, never anything else.

mod common;

use common::{Gen, HOSTS, PORTS, hex};
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

/// A filter of the shape endpoints install: one service on one host.
fn service(g: &mut Gen) -> String {
    let port = if g.rng.random_bool(0.5) {
        PORTS[g.rng.random_range(0..PORTS.len())]
    } else {
        g.rng.random_range(1000..1400)
    };
    let h = HOSTS[g.rng.random_range(0..HOSTS.len())];
    let host = format!("{}.{}.{}.{}", h[0], h[1], h[2], h[3]);
    match g.rng.random_range(0..4) {
        0 => format!("tcp dst port {port} and dst host {host}"),
        1 => format!("udp dst port {port}"),
        2 => format!("ip dst host {host} and tcp port {port}"),
        _ => format!("tcp and dst port {port}"),
    }
}

fn random_table(g: &mut Gen, n: usize) -> (Table, Model) {
    let mut table = Table::new();
    let mut model = Model::new();
    let mut sources = Vec::new();
    for owner in 0..n as u32 {
        let src = if g.rng.random_bool(0.6) {
            service(g)
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
                service(&mut g)
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
