//! `fastpath filter` end to end: `check` prints the parse and the decision
//! structure and points at a syntax error's column; `compile` prints the
//! code; `match` classifies a capture and prints per-owner counts.
//!
//! The captures are written here (with `pcap-file`, or byte by byte for the
//! edge cases libpcap accepts and `pcap-file` does not), or made by tcpdump
//! and dumpcap (`crates/dpf/tests/data`, see its README). `-` reads the
//! table or the capture from standard input; `--json` prints one JSON
//! object.

use std::path::{Path, PathBuf};

mod common;
use common::{fastpath, fastpath_with_input, json_error};

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
    // The column in the line (the filter starts at its third character).
    assert!(err.contains("table.txt:3:15: syntax error"), "{err}");
    std::fs::write(&table, "1   tcp or 80\n").unwrap();
    let (ok, _, err) = fastpath(&["filter", "compile", table.to_str().unwrap()]);
    assert!(!ok);
    assert!(
        err.contains("table.txt:1:12: \"80\" needs a qualifier"),
        "{err}"
    );
    assert!(err.contains("\n  tcp or 80\n         ^"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

/// A scratch directory for one test, removed when dropped.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("fastpath-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
    fn file(&self, name: &str, bytes: &[u8]) -> String {
        let p = self.0.join(name);
        std::fs::write(&p, bytes).unwrap();
        p.to_str().unwrap().to_string()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A capture made by tcpdump or dumpcap (see crates/dpf/tests/data).
fn real(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../dpf/tests/data")
        .join(name)
        .to_str()
        .unwrap()
        .to_string()
}

/// The table the real captures are classified with: the loopback traffic
/// is TCP to and from port 8080 and UDP to 5353; veth0's, TCP to port 80
/// and UDP to 53.
const TABLE: &str = "\
# owner[/priority] filter
1     tcp dst port 8080
2     udp               # DNS and mDNS
3/5   tcp dst port 80   # ranked above the rest
4/-1  ip
";

/// A little-endian pcap file: header fields, then records (captured
/// length, original length, bytes).
fn pcap_bytes(magic: u32, snaplen: u32, link: u32, records: &[(u32, u32, &[u8])]) -> Vec<u8> {
    let mut f = Vec::new();
    for v in [magic, 0x0004_0002, 0, 0, snaplen, link] {
        f.extend_from_slice(&v.to_le_bytes());
    }
    for (caplen, len, bytes) in records {
        for v in [1, 0, *caplen, *len] {
            f.extend_from_slice(&v.to_le_bytes());
        }
        f.extend_from_slice(bytes);
    }
    f
}

fn counts(out: &str) -> Vec<&str> {
    out.lines().collect()
}

#[test]
fn match_reads_captures_made_by_tcpdump_and_dumpcap() {
    let d = Dir::new("filter-real");
    let table = d.file("table.txt", TABLE.as_bytes());
    // tcpdump -w, tcpdump -s 64 -w, and tcpdump's nanosecond pcap: the
    // same classification (pcap-file refused the snaplen-64 capture).
    for name in ["lo.pcap", "lo-snap64.pcap", "lo-nano.pcap"] {
        let (ok, out, err) = fastpath(&["filter", "match", &table, &real(name)]);
        assert!(ok, "{name}: {err}");
        assert_eq!(
            counts(&out),
            [
                "40 packets",
                "owner 1: 18",
                "owner 2: 4",
                "owner 4: 18",
                "no match: 0"
            ],
            "{name}"
        );
    }
    // dumpcap's pcapng with two interfaces: veth0 adds 3 TCP SYNs to port
    // 80 and 2 UDP datagrams, and one IPv6 packet no filter matches.
    let (ok, out, err) = fastpath(&["filter", "match", &table, &real("two-if.pcapng")]);
    assert!(ok, "{err}");
    assert_eq!(
        counts(&out),
        [
            "46 packets",
            "owner 1: 18",
            "owner 2: 6",
            "owner 3: 3",
            "owner 4: 18",
            "no match: 1"
        ]
    );
    // Interfaces with different snaplens (libpcap refuses the file).
    let (ok, out, err) = fastpath(&["filter", "match", &table, &real("two-snaplens.pcapng")]);
    assert!(ok, "{err}");
    assert!(out.starts_with("45 packets\n"), "{out}");
}

#[test]
fn match_takes_what_libpcap_takes() {
    let d = Dir::new("filter-lenient");
    let table = d.file("table.txt", TABLE.as_bytes());
    let mut f = frame([127, 0, 0, 1], 8080);
    f.resize(106, 0);
    // Snaplen 64 and one 106-byte frame captured to 64 bytes.
    let snap = d.file(
        "snap64.pcap",
        &pcap_bytes(0xa1b2_c3d4, 64, 1, &[(64, 106, &f[..64])]),
    );
    // A captured length (106) over the snaplen (64): cut to it.
    let over = d.file(
        "over.pcap",
        &pcap_bytes(0xa1b2_c3d4, 64, 1, &[(106, 106, &f)]),
    );
    // Flag bits above the link type (an FCS length).
    let fcs = d.file(
        "fcs.pcap",
        &pcap_bytes(0xa1b2_c3d4, 65535, 0x3000_0001, &[(106, 106, &f)]),
    );
    // The nanosecond magic.
    let nano = d.file(
        "nano.pcap",
        &pcap_bytes(0xa1b2_3c4d, 65535, 1, &[(106, 106, &f)]),
    );
    for cap in [&snap, &over, &fcs, &nano] {
        let (ok, out, err) = fastpath(&["filter", "match", &table, cap]);
        assert!(ok, "{cap}: {err}");
        assert!(out.starts_with("1 packet\nowner 1: 1\n"), "{cap}: {out}");
    }
    let (_, out, _) = fastpath(&["filter", "match", &table, &over]);
    assert!(
        out.contains("cut to the snaplen, as libpcap does: 1 packet\n"),
        "{out}"
    );
}

/// `len`, `greater` and `less` read a packet's length on the wire, as
/// libpcap's `pcap_offline_filter` does, not the bytes a snaplen kept:
/// tcpdump's `-s 64` capture classifies as the whole one, and both as the
/// original lengths the records hold say.
#[test]
fn len_is_the_length_on_the_wire_in_a_capture_cut_to_its_snaplen() {
    let d = Dir::new("filter-wire-len");
    let lens: Vec<u32> = {
        let bytes = std::fs::read(real("lo.pcap")).unwrap();
        let mut r = dpf::capture::CaptureReader::new(&bytes[..]).unwrap();
        let mut lens = Vec::new();
        while let Some(p) = r.next_packet().unwrap() {
            lens.push(p.orig_len);
        }
        lens
    };
    for (filter, holds) in [
        ("greater 100", &(|l: u32| l >= 100) as &dyn Fn(u32) -> bool),
        ("less 64", &|l| l <= 64),
        ("len = 66", &|l| l == 66),
        ("len > 64 and len < 100", &|l| l > 64 && l < 100),
    ] {
        let want = lens.iter().filter(|&&l| holds(l)).count();
        assert!(
            want > 0 && want < lens.len(),
            "{filter}: {want} of {}",
            lens.len()
        );
        let table = d.file("table.txt", format!("1 {filter}\n").as_bytes());
        for cap in ["lo.pcap", "lo-snap64.pcap"] {
            let (ok, out, err) = fastpath(&["filter", "match", &table, &real(cap)]);
            assert!(ok, "{filter} on {cap}: {err}");
            assert_eq!(
                counts(&out)[..3],
                [
                    "40 packets".to_string(),
                    format!("owner 1: {want}"),
                    format!("no match: {}", 40 - want)
                ],
                "{filter} on {cap}"
            );
        }
    }
}

#[test]
fn a_dash_reads_standard_input() {
    let d = Dir::new("filter-stdin");
    let table = d.file("table.txt", TABLE.as_bytes());
    let cap = std::fs::read(real("lo-snap64.pcap")).unwrap();
    let (ok, out, err) = fastpath_with_input(&["filter", "match", &table, "-"], &cap);
    assert!(ok, "{err}");
    assert!(out.starts_with("40 packets\n"), "{out}");
    let (ok, out, err) = fastpath_with_input(
        &["filter", "match", "-", &real("lo.pcap")],
        TABLE.as_bytes(),
    );
    assert!(ok, "{err}");
    assert!(out.contains("owner 4: 18"), "{out}");
    let (ok, out, err) = fastpath_with_input(&["filter", "compile", "-"], TABLE.as_bytes());
    assert!(ok, "{err}");
    assert!(out.starts_with("4 filters compiled"), "{out}");
    let (ok, _, err) = fastpath_with_input(&["filter", "match", "-", "-"], b"");
    assert!(!ok);
    assert!(err.contains("cannot both be standard input"), "{err}");
}

#[test]
fn inputs_that_are_not_captures_are_named_for_what_they_are() {
    let d = Dir::new("filter-bad");
    let table = d.file("table.txt", TABLE.as_bytes());
    let (ok, _, err) = fastpath(&["filter", "match", &table, d.0.to_str().unwrap()]);
    assert!(!ok);
    assert!(
        err.contains("is a directory, expected a pcap or pcapng capture"),
        "{err}"
    );
    let empty = d.file("empty.pcap", b"");
    let (ok, _, err) = fastpath(&["filter", "match", &table, &empty]);
    assert!(!ok);
    assert!(err.contains("empty.pcap: the input is empty"), "{err}");
    let (ok, _, err) = fastpath(&["filter", "match", &table, &table]);
    assert!(!ok);
    assert!(
        err.contains("byte 0: not a pcap or pcapng capture"),
        "{err}"
    );
    // tcpdump -i any: Linux cooked headers, not Ethernet.
    let (ok, out, err) = fastpath(&["filter", "match", &table, &real("any-sll2.pcap")]);
    assert!(!ok);
    assert!(out.is_empty(), "{out}");
    assert!(err.contains("link type 276 (LINUX_SLL2"), "{err}");
    assert!(err.contains("Ethernet frames only"), "{err}");
}

#[test]
fn a_truncated_capture_gives_the_counts_so_far_and_where_it_stopped() {
    let d = Dir::new("filter-trunc");
    let table = d.file("table.txt", TABLE.as_bytes());
    let whole = std::fs::read(real("lo.pcap")).unwrap();
    // Cut in the middle of the 11th record (24-byte file header first).
    let mut at = 24;
    for _ in 0..10 {
        let caplen = u32::from_le_bytes(whole[at + 8..at + 12].try_into().unwrap());
        at += 16 + caplen as usize;
    }
    let cap = d.file("trunc.pcap", &whole[..at + 20]);
    let (ok, out, err) = fastpath(&["filter", "match", &table, &cap]);
    assert!(!ok, "a truncated capture exits non-zero");
    assert!(out.starts_with("10 packets (incomplete"), "{out}");
    assert!(
        err.contains(&format!(
            "trunc.pcap: byte {at}: the capture is truncated inside the data of packet 11"
        )),
        "{err}"
    );
    assert!(err.contains("cover the 10 packets before it"), "{err}");
    let (ok, out, _) = fastpath(&["filter", "match", "--json", &table, &cap]);
    assert!(!ok);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["packets"], 10);
    assert_eq!(v["complete"], false);
    assert!(v["stopped"].as_str().unwrap().contains("truncated"), "{v}");
}

#[test]
fn table_files_take_comments_and_say_what_owners_and_priorities_are() {
    let d = Dir::new("filter-table");
    let t = d.file(
        "t.txt",
        b"1 tcp   # web\n  # indented comment\n2/3 udp#dns\n",
    );
    let (ok, out, err) = fastpath(&["filter", "compile", &t]);
    assert!(ok, "{err}");
    assert!(out.starts_with("2 filters compiled"), "{out}");
    let t = d.file("t.txt", b"1 tcp\n2/99999999999 udp\n");
    let (ok, _, err) = fastpath(&["filter", "compile", &t]);
    assert!(!ok);
    assert!(
        err.contains("t.txt:2:3: priority 99999999999 is out of range"),
        "{err}"
    );
    assert!(err.contains("-2147483648 to 2147483647"), "{err}");
    let t = d.file("t.txt", b"web tcp\n");
    let (ok, _, err) = fastpath(&["filter", "compile", &t]);
    assert!(!ok);
    assert!(
        err.contains("t.txt:1:1: owner `web` is not a whole number"),
        "{err}"
    );
    for cmd in ["compile", "match"] {
        let (ok, out, _) = fastpath(&["filter", cmd, "--help"]);
        assert!(ok);
        assert!(out.contains("0 to 4294967295"), "{cmd}: {out}");
        assert!(out.contains("-2147483648 to"), "{cmd}: {out}");
        assert!(out.contains("comment"), "{cmd}: {out}");
    }
}

#[test]
fn output_is_text_for_people_and_json_for_scripts() {
    let d = Dir::new("filter-json");
    let table = d.file("table.txt", TABLE.as_bytes());
    let (ok, out, _) = fastpath(&["filter", "compile", &table]);
    assert!(ok);
    assert!(!out.contains("MergeStats") && !out.contains(" {"), "{out}");
    assert!(out.contains("merged into a trie of "), "{out}");
    let (_, out, _) = fastpath(&["filter", "check", "tcp dst port 80 and dst host 10.0.0.1"]);
    assert!(
        !out.contains("Link[") && !out.contains("Transport["),
        "{out}"
    );

    let (ok, out, err) = fastpath(&["filter", "compile", "--json", &table]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["filters"], 4);
    assert!(v["merged"]["nodes"].as_u64().unwrap() > 0, "{v}");
    assert!(v["code_bytes"].as_u64().unwrap() > 0, "{v}");

    let expr = "tcp dst port 80 and dst host 10.0.0.1";
    let (ok, out, err) = fastpath(&["filter", "check", "--json", expr]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["filter"], expr);
    assert_eq!(v["atoms"].as_array().unwrap().len(), 5, "{v}");
    assert_eq!(v["atoms"][0]["base"], "ether", "{v}");
    assert_eq!(v["residual"], serde_json::Value::Null, "{v}");

    let (ok, out, err) = fastpath(&["filter", "match", "--json", &table, &real("two-if.pcapng")]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["format"], "pcapng");
    assert_eq!(v["packets"], 46);
    assert_eq!(v["owners"]["3"], 3);
    assert_eq!(v["no_match"], 1);
    assert_eq!(v["complete"], true);
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
    // The window around the column, not the whole filter, and the caret
    // under the 65th negation.
    let (shown, under) = pointed_at(&err);
    assert!(shown.chars().count() < 130, "{shown}");
    assert!(
        shown.starts_with("...!!!") && shown.ends_with("!!!..."),
        "{shown}"
    );
    assert_eq!(under, '!');
}

/// The line an error shows and the character its caret points at.
fn pointed_at(err: &str) -> (String, char) {
    let lines: Vec<&str> = err.lines().collect();
    let i = lines
        .iter()
        .position(|l| l.trim_start().starts_with('^'))
        .expect("a caret line");
    let shown = lines[i - 1].strip_prefix("  ").expect("indented");
    let caret = lines[i].strip_prefix("  ").expect("indented");
    let at = caret.chars().count() - 1;
    (
        shown.to_string(),
        shown.chars().nth(at).expect("caret inside"),
    )
}

/// A caret lines up under its column however tabs are set: its padding
/// repeats the tabs before the column.
#[test]
fn a_caret_lines_up_under_tabs() {
    let (ok, _, err) = fastpath(&["filter", "check", "tcp\tport\t80x"]);
    assert!(!ok);
    assert!(
        err.contains("\n  tcp\tport\t80x\n     \t    \t^"),
        "{err:?}"
    );
    assert_eq!(pointed_at(&err).1, '8');
}

/// With `--json`, each subcommand that fails before it has a result
/// prints the error object on stdout, the same message on stderr, and
/// exits 1 as without `--json`.
#[test]
fn json_errors_are_one_object_on_stdout() {
    let (command, message) = json_error(&["filter", "check", "tcp dst port 80 and"]);
    assert_eq!(command, "filter check");
    assert!(message.starts_with("column 20: "), "{message}");
    assert!(message.ends_with("                   ^"), "{message}");

    let d = Dir::new("filter-json-errors");
    let missing = d.0.join("missing.txt");
    let (command, message) = json_error(&["filter", "compile", missing.to_str().unwrap()]);
    assert_eq!(command, "filter compile");
    assert!(message.contains("missing.txt"), "{message}");

    let table = d.file("table.txt", b"1 tcp dst port 80\n2 bogus filter\n");
    let (command, message) = json_error(&["filter", "compile", &table]);
    assert_eq!(command, "filter compile");
    assert!(message.contains("table.txt:2:"), "{message}");

    let table = d.file("good.txt", TABLE.as_bytes());
    let not_a_capture = d.file("not.pcap", b"this is not a capture");
    let (command, message) = json_error(&["filter", "match", &table, &not_a_capture]);
    assert_eq!(command, "filter match");
    assert!(message.contains("not.pcap"), "{message}");
    let (command, message) = json_error(&["filter", "match", "-", "-"]);
    assert_eq!(command, "filter match");
    assert!(
        message.contains("cannot both be standard input"),
        "{message}"
    );
}

/// A capture that stops early is a result, not an error before one: the
/// counts are the one object on stdout (no error object after them).
#[test]
fn a_stopped_capture_prints_its_counts_alone() {
    let d = Dir::new("filter-json-stopped");
    let table = d.file("table.txt", TABLE.as_bytes());
    let whole = std::fs::read(real("lo.pcap")).unwrap();
    let cap = d.file("trunc.pcap", &whole[..whole.len() - 5]);
    let (ok, out, err) = fastpath(&["filter", "match", "--json", &table, &cap]);
    assert!(!ok);
    let v: serde_json::Value = serde_json::from_str(&out).expect("one JSON object");
    assert_eq!(v["complete"], false, "{v}");
    assert!(v.get("error").is_none(), "{v}");
    assert!(err.contains("the counts printed cover the"), "{err}");
}
