//! `fastpath filter` end to end: `check` prints the parse and the decision
//! structure and points at a syntax error's column; `compile` prints the
//! code; `match` classifies a pcap capture (written here with `pcap-file`)
//! and prints per-owner counts.

use std::path::Path;

mod common;
use common::fastpath;

/// A TCP/IPv4 frame to `dst`, destination port `port`.
fn frame(dst: [u8; 4], port: u16) -> Vec<u8> {
    let mut p = vec![0u8; 60];
    p[12..14].copy_from_slice(&[0x08, 0x00]);
    p[14] = 0x45;
    p[23] = 6;
    p[30..34].copy_from_slice(&dst);
    p[36..38].copy_from_slice(&port.to_be_bytes());
    p
}

fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    use pcap_file::pcap::{PcapPacket, PcapWriter};
    let file = std::fs::File::create(path).unwrap();
    let mut w = PcapWriter::new(file).unwrap();
    for (i, f) in frames.iter().enumerate() {
        let ts = std::time::Duration::from_millis(i as u64);
        w.write_packet(&PcapPacket::new(ts, f.len() as u32, f))
            .unwrap();
    }
}

#[test]
fn check_prints_the_parse_and_the_atoms() {
    let (ok, out, _) = fastpath(&["filter", "check", "tcp dst port 80 and dst host 10.0.0.1"]);
    assert!(ok);
    assert!(out.contains("parse:"), "{out}");
    assert!(out.contains("5 atoms"), "{out}");
    assert!(out.contains("no residual"), "{out}");
}

#[test]
fn check_points_at_the_column_of_a_syntax_error() {
    let (ok, _, err) = fastpath(&["filter", "check", "tcp dst port 80 and"]);
    assert!(!ok);
    assert!(err.contains("column 20"), "{err}");
    assert!(err.contains("                   ^"), "{err}");
}

#[test]
fn compile_and_match_a_table() {
    let dir = std::env::temp_dir().join(format!("fastpath-filter-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let table = dir.join("table.txt");
    std::fs::write(
        &table,
        "# owner[/priority] filter\n\
         1 tcp dst port 80 and dst host 10.0.0.1\n\
         2 tcp dst port 443\n\
         3/-1 ip\n",
    )
    .unwrap();
    let (ok, out, err) = fastpath(&["filter", "compile", table.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(out.contains("3 filters compiled"), "{out}");
    assert!(out.contains("code:"), "{out}");

    let pcap = dir.join("cap.pcap");
    let mut frames = Vec::new();
    frames.extend((0..5).map(|_| frame([10, 0, 0, 1], 80)));
    frames.extend((0..3).map(|_| frame([10, 0, 0, 7], 443)));
    frames.extend((0..2).map(|_| frame([10, 0, 0, 7], 22)));
    frames.push(vec![0u8; 10]);
    write_pcap(&pcap, &frames);
    let (ok, out, err) = fastpath(&[
        "filter",
        "match",
        table.to_str().unwrap(),
        pcap.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    for line in [
        "11 packets",
        "owner 1: 5",
        "owner 2: 3",
        "owner 3: 2",
        "no match: 1",
    ] {
        assert!(out.contains(line), "{line:?} missing from\n{out}");
    }

    std::fs::write(&table, "1 tcp dst port 80\nx udp\n").unwrap();
    let (ok, _, err) = fastpath(&["filter", "compile", table.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("table.txt:2"), "{err}");

    std::fs::write(&table, "1 tcp\n# a comment\n2 tcp dst port\n").unwrap();
    let (ok, _, err) = fastpath(&["filter", "compile", table.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("table.txt:3: column 13"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn check_rejects_filters_past_the_limits_with_an_error_not_an_abort() {
    // 120 KB of negations: past the length limit.
    let long = format!("{}tcp", "not ".repeat(30_000));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fastpath"))
        .args(["filter", "check", &long])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "an error exit, not a signal");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("the filter is 120003 bytes long; the limit is 65536 bytes"),
        "{err}"
    );
    // 4,000 negations fit the length but not the nesting: the column of
    // the first one too deep, with a caret under it.
    let deep = format!("{}udp", "!".repeat(4000));
    let (ok, _, err) = fastpath(&["filter", "check", &deep]);
    assert!(!ok);
    assert!(
        err.contains("column 65: parentheses and negations nested more than 64 deep"),
        "{err}"
    );
    assert!(err.contains(&format!("\n  {}^", " ".repeat(64))), "{err}");
}
