//! The capture reader against libpcap: every capture libpcap's
//! `pcap_open_offline` reads, `dpf::capture` reads to the same packets
//! (original length and captured bytes), and stops where libpcap stops.
//!
//! The captures are of two origins: files made by tcpdump and dumpcap
//! (`tests/data`, see its README), and edge cases built here byte by byte
//! (short snaplens, captured lengths over the snaplen, link-type flag bits,
//! nanosecond and Kuznetzov magics, both byte orders, old versions whose
//! lengths are swapped, truncation, pcapng with several interfaces and
//! sections). Where libpcap is stricter than dpf (pcapng interfaces of
//! different link types or snaplens), the test says what dpf reads instead.
//! Without libpcap the oracle comparisons skip with a printed reason,
//! unless `DPF_REQUIRE_LIBPCAP=1` (set by `scripts/test.sh`).

use std::path::{Path, PathBuf};

use dpf::capture::{CaptureError, CaptureReader, Format};
use dpf::pcap::Libpcap;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// A scratch file for one test case in a directory of its own, both
/// removed when dropped.
struct Scratch {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Scratch {
    fn new(name: &str, bytes: &[u8]) -> Scratch {
        let dir = tempfile::Builder::new()
            .prefix("dpf-capture-")
            .tempdir()
            .unwrap();
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        Scratch { path, _dir: dir }
    }
}

/// What dpf reads from a capture: the packets (original length, bytes)
/// and the error that stopped it, if any.
fn read_dpf(bytes: &[u8]) -> (Vec<(u32, Vec<u8>)>, Option<CaptureError>) {
    let mut r = match CaptureReader::new(bytes) {
        Ok(r) => r,
        Err(e) => return (Vec::new(), Some(e)),
    };
    let mut packets = Vec::new();
    loop {
        match r.next_packet() {
            Ok(Some(p)) => packets.push((p.orig_len, p.data.to_vec())),
            Ok(None) => return (packets, None),
            Err(e) => return (packets, Some(e)),
        }
    }
}

fn libpcap_or_skip() -> Option<Libpcap> {
    match Libpcap::load() {
        Ok(p) => Some(p),
        Err(e) if std::env::var("DPF_REQUIRE_LIBPCAP").as_deref() == Ok("1") => {
            panic!("DPF_REQUIRE_LIBPCAP=1 but {e}")
        }
        Err(e) => {
            eprintln!("skipped the libpcap comparison: {e}");
            None
        }
    }
}

/// Asserts that dpf reads `path` exactly as libpcap does: the same packets,
/// and an error exactly when libpcap fails to open the file or stops with
/// one. Returns what dpf read.
fn same_as_libpcap(path: &Path) -> (Vec<(u32, Vec<u8>)>, Option<CaptureError>) {
    let bytes = std::fs::read(path).unwrap();
    let (packets, error) = read_dpf(&bytes);
    let Some(pcap) = libpcap_or_skip() else {
        return (packets, error);
    };
    match pcap.read_offline(path) {
        Err(e) => assert!(
            error.is_some() && packets.is_empty(),
            "{}: libpcap refuses it ({e}) but dpf read {} packets, error {error:?}",
            path.display(),
            packets.len()
        ),
        Ok(off) => {
            assert_eq!(off.link_type, 1, "{}", path.display());
            assert_eq!(
                packets.len(),
                off.packets.len(),
                "{}: packet counts (dpf error: {error:?}, libpcap error: {:?})",
                path.display(),
                off.error
            );
            for (i, (ours, theirs)) in packets.iter().zip(&off.packets).enumerate() {
                assert_eq!(ours, theirs, "{}: packet {}", path.display(), i + 1);
            }
            assert_eq!(
                error.is_some(),
                off.error.is_some(),
                "{}: dpf error {error:?}, libpcap error {:?}",
                path.display(),
                off.error
            );
        }
    }
    (packets, error)
}

/// A pcap file: `magic` written in the byte order `big`, then the header
/// fields, then each record (captured-length field, original length,
/// bytes).
fn pcap_file(
    magic: u32,
    big: bool,
    version: (u16, u16),
    snaplen: u32,
    link: u32,
    records: &[(u32, u32, Vec<u8>)],
) -> Vec<u8> {
    let w32 = |v: u32| {
        if big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let w16 = |v: u16| {
        if big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let mut f = Vec::new();
    f.extend_from_slice(&w32(magic));
    f.extend_from_slice(&w16(version.0));
    f.extend_from_slice(&w16(version.1));
    for v in [0, 0, snaplen, link] {
        f.extend_from_slice(&w32(v));
    }
    for (i, (caplen, len, bytes)) in records.iter().enumerate() {
        for v in [1_700_000_000 + i as u32, 250, *caplen, *len] {
            f.extend_from_slice(&w32(v));
        }
        if magic == 0xa1b2_cd34 {
            f.extend_from_slice(&[0u8; 8]); // ifindex, protocol, type, pad
        }
        f.extend_from_slice(bytes);
    }
    f
}

/// An Ethernet frame of `n` bytes, numbered by its bytes.
fn frame(n: usize, seed: u8) -> Vec<u8> {
    let mut p: Vec<u8> = (0..n).map(|i| (i as u8).wrapping_mul(7) ^ seed).collect();
    if n >= 14 {
        p[12..14].copy_from_slice(&[0x08, 0x00]);
    }
    p
}

const MICRO: u32 = 0xa1b2_c3d4;
const NANO: u32 = 0xa1b2_3c4d;

#[test]
fn captures_made_by_tcpdump_and_dumpcap_read_as_libpcap_reads_them() {
    for (name, count) in [
        ("lo.pcap", 40),
        ("lo-snap64.pcap", 40),
        ("lo-nano.pcap", 40),
        ("two-if.pcapng", 46),
    ] {
        let (packets, error) = same_as_libpcap(&data(name));
        assert!(error.is_none(), "{name}: {error:?}");
        assert_eq!(packets.len(), count, "{name}");
    }
    // tcpdump -s 64: every packet's original length is kept, its bytes cut
    // to 64.
    let (packets, _) = read_dpf(&std::fs::read(data("lo-snap64.pcap")).unwrap());
    assert!(packets.iter().all(|(_, d)| d.len() <= 64));
    assert!(packets.iter().any(|(len, _)| *len > 64));
}

#[test]
fn pcapng_interfaces_keep_their_own_snaplens_where_libpcap_refuses_the_file() {
    let path = data("two-snaplens.pcapng");
    let bytes = std::fs::read(&path).unwrap();
    let mut r = CaptureReader::new(&bytes[..]).unwrap();
    assert_eq!(r.format(), Format::PcapNg);
    let mut per_if = [0usize; 2];
    while let Some(p) = r.next_packet().unwrap() {
        per_if[p.interface as usize] += 1;
        if p.interface == 1 {
            assert!(p.data.len() <= 64);
        }
    }
    assert_eq!(per_if, [40, 5]);
    let snaplens: Vec<u32> = r.interfaces().iter().map(|i| i.snaplen).collect();
    assert_eq!(snaplens, [262_144, 64]);
    if let Some(pcap) = libpcap_or_skip() {
        // libpcap stops at the second interface; dpf reads on.
        let off = pcap.read_offline(&path);
        assert!(
            off.as_ref().is_err() || off.as_ref().unwrap().error.is_some(),
            "{off:?}"
        );
    }
}

#[test]
fn a_snaplen_shorter_than_the_packets_is_what_a_short_snaplen_means() {
    // snaplen 64, one 106-byte frame captured to its first 64 bytes.
    let f = frame(106, 1);
    let file = pcap_file(MICRO, false, (2, 4), 64, 1, &[(64, 106, f[..64].to_vec())]);
    let s = Scratch::new("snap64.pcap", &file);
    let (packets, error) = same_as_libpcap(&s.path);
    assert!(error.is_none(), "{error:?}");
    assert_eq!(packets, [(106, f[..64].to_vec())]);
}

#[test]
fn a_captured_length_over_the_snaplen_is_cut_to_it() {
    let f = frame(100, 2);
    let g = frame(60, 3);
    let file = pcap_file(
        MICRO,
        false,
        (2, 4),
        64,
        1,
        &[(100, 100, f.clone()), (60, 60, g.clone())],
    );
    let s = Scratch::new("over.pcap", &file);
    let (packets, error) = same_as_libpcap(&s.path);
    assert!(error.is_none(), "{error:?}");
    assert_eq!(packets, [(100, f[..64].to_vec()), (60, g)]);
    let mut r = CaptureReader::new(&file[..]).unwrap();
    assert!(r.next_packet().unwrap().unwrap().cut);
    assert!(!r.next_packet().unwrap().unwrap().cut);
}

#[test]
fn a_captured_length_over_libpcaps_maximum_is_an_error_at_its_record() {
    let file = pcap_file(
        MICRO,
        false,
        (2, 4),
        64,
        1,
        &[(300_000, 300_000, vec![0; 16])],
    );
    let s = Scratch::new("huge.pcap", &file);
    let (packets, error) = same_as_libpcap(&s.path);
    assert!(packets.is_empty());
    let e = error.unwrap();
    assert_eq!(e.offset(), 24 + 8);
    assert!(
        e.to_string()
            .contains("captured length 300000 is over 262144"),
        "{e}"
    );
}

#[test]
fn flag_bits_above_the_link_type_are_masked() {
    let f = frame(60, 4);
    let file = pcap_file(
        MICRO,
        false,
        (2, 4),
        65535,
        0x3000_0001,
        &[(60, 60, f.clone())],
    );
    let s = Scratch::new("fcs.pcap", &file);
    let (packets, error) = same_as_libpcap(&s.path);
    assert!(error.is_none(), "{error:?}");
    assert_eq!(packets, [(60, f)]);
    let r = CaptureReader::new(&file[..]).unwrap();
    let Format::Pcap {
        link_type,
        link_type_ext,
        ..
    } = r.format()
    else {
        panic!("pcap")
    };
    assert_eq!((link_type, link_type_ext), (1, 0x3000));
}

#[test]
fn both_byte_orders_and_every_magic_libpcap_knows() {
    let frames: Vec<Vec<u8>> = (0..3).map(|i| frame(60 + 10 * i, i as u8)).collect();
    let records: Vec<(u32, u32, Vec<u8>)> = frames
        .iter()
        .map(|f| (f.len() as u32, f.len() as u32 + 4, f.clone()))
        .collect();
    for (magic, name) in [(MICRO, "micro"), (NANO, "nano"), (0xa1b2_cd34, "kuznetzov")] {
        for big in [false, true] {
            let file = pcap_file(magic, big, (2, 4), 65535, 1, &records);
            let s = Scratch::new(&format!("{name}-{big}.pcap"), &file);
            let (packets, error) = same_as_libpcap(&s.path);
            assert!(error.is_none(), "{name} big={big}: {error:?}");
            assert_eq!(packets.len(), 3, "{name} big={big}");
            let r = CaptureReader::new(&file[..]).unwrap();
            if let Format::Pcap {
                nanoseconds,
                big_endian,
                ..
            } = r.format()
            {
                assert_eq!((nanoseconds, big_endian), (magic == NANO, big));
            }
        }
    }
    // Timestamps follow the magic's unit.
    let file = pcap_file(NANO, true, (2, 4), 65535, 1, &records[..1]);
    let mut r = CaptureReader::new(&file[..]).unwrap();
    assert_eq!(
        r.next_packet().unwrap().unwrap().timestamp_ns,
        1_700_000_000_000_000_250
    );
    let file = pcap_file(MICRO, false, (2, 4), 65535, 1, &records[..1]);
    let mut r = CaptureReader::new(&file[..]).unwrap();
    assert_eq!(
        r.next_packet().unwrap().unwrap().timestamp_ns,
        1_700_000_000_000_250_000
    );
}

#[test]
fn old_versions_swap_the_two_lengths_as_libpcap_does() {
    let f = frame(60, 5);
    // Version 2.2 and 543.0 write the original length first; 2.3 may.
    for version in [(2, 2), (543, 0), (2, 3)] {
        let file = pcap_file(MICRO, false, version, 65535, 1, &[(80, 60, f.clone())]);
        let s = Scratch::new("old.pcap", &file);
        let (packets, error) = same_as_libpcap(&s.path);
        assert!(error.is_none(), "{version:?}: {error:?}");
        assert_eq!(packets, [(80, f.clone())], "{version:?}");
    }
    for version in [(1, 0), (2, 5), (3, 0)] {
        let file = pcap_file(MICRO, false, version, 65535, 1, &[]);
        let s = Scratch::new("bad-version.pcap", &file);
        let (_, error) = same_as_libpcap(&s.path);
        let e = error.unwrap();
        assert_eq!(e.offset(), 4, "{e}");
        assert!(e.to_string().contains("expected 2.0 to 2.4"), "{e}");
    }
}

#[test]
fn a_truncated_capture_gives_the_packets_before_it_and_where_it_stopped() {
    let frames: Vec<Vec<u8>> = (0..4).map(|i| frame(70, i)).collect();
    let records: Vec<(u32, u32, Vec<u8>)> = frames.iter().map(|f| (70, 70, f.clone())).collect();
    let file = pcap_file(MICRO, false, (2, 4), 65535, 1, &records);
    // Inside the data of packet 3, then inside its record header.
    for (cut, what) in [
        (24 + 2 * 86 + 16 + 30, "the data of packet 3"),
        (24 + 2 * 86 + 10, "the record header of packet 3"),
    ] {
        let s = Scratch::new("trunc.pcap", &file[..cut]);
        let (packets, error) = same_as_libpcap(&s.path);
        assert_eq!(packets.len(), 2);
        let e = error.unwrap();
        let CaptureError::Truncated { offset, .. } = &e else {
            panic!("{e}")
        };
        assert_eq!(*offset, 24 + 2 * 86);
        assert!(e.to_string().contains(what), "{e}");
    }
    // Inside the file header.
    let s = Scratch::new("trunc-header.pcap", &file[..10]);
    let (_, error) = same_as_libpcap(&s.path);
    assert!(
        error
            .unwrap()
            .to_string()
            .contains("inside the file header")
    );
}

#[test]
fn an_empty_file_and_a_file_of_another_kind_are_named_for_what_they_are() {
    let s = Scratch::new("empty.pcap", b"");
    let (_, error) = same_as_libpcap(&s.path);
    assert!(matches!(error, Some(CaptureError::Empty)));
    let s = Scratch::new("text.pcap", b"1 tcp dst port 80\n");
    let (_, error) = same_as_libpcap(&s.path);
    let e = error.unwrap();
    assert!(
        e.to_string().contains("not a pcap or pcapng capture"),
        "{e}"
    );
    assert!(e.to_string().contains("looks like text"), "{e}");
    let (_, error) = read_dpf(&[0x1f, 0x8b, 8, 0, 0, 0]);
    assert!(error.unwrap().to_string().contains("gzip"));
}

/// A pcapng block: type, body padded to 4 bytes, lengths in `big` order.
fn block(big: bool, ty: u32, body: &[u8]) -> Vec<u8> {
    let w32 = |v: u32| {
        if big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let mut body = body.to_vec();
    body.resize(body.len().div_ceil(4) * 4, 0);
    let total = body.len() as u32 + 12;
    let mut b = Vec::new();
    b.extend_from_slice(&w32(ty));
    b.extend_from_slice(&w32(total));
    b.extend_from_slice(&body);
    b.extend_from_slice(&w32(total));
    b
}

struct Ng {
    big: bool,
    bytes: Vec<u8>,
}

impl Ng {
    fn w32(&self, v: u32) -> [u8; 4] {
        if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }
    fn w16(&self, v: u16) -> [u8; 2] {
        if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }
    fn section(big: bool) -> Ng {
        let mut ng = Ng {
            big,
            bytes: Vec::new(),
        };
        ng.shb();
        ng
    }
    fn shb(&mut self) {
        let mut body = self.w32(0x1a2b_3c4d).to_vec();
        body.extend_from_slice(&self.w16(1));
        body.extend_from_slice(&self.w16(0));
        body.extend_from_slice(&[0xff; 8]); // section length unknown
        self.bytes.extend(block(self.big, 0x0a0d_0d0a, &body));
    }
    /// An interface; `tsresol`, if given, as an `if_tsresol` option.
    fn idb(&mut self, link: u16, snaplen: u32, tsresol: Option<u8>) {
        let mut body = self.w16(link).to_vec();
        body.extend_from_slice(&[0, 0]);
        body.extend_from_slice(&self.w32(snaplen));
        if let Some(r) = tsresol {
            body.extend_from_slice(&self.w16(9));
            body.extend_from_slice(&self.w16(1));
            body.extend_from_slice(&[r, 0, 0, 0]);
            body.extend_from_slice(&[0; 4]); // opt_endofopt
        }
        self.bytes.extend(block(self.big, 1, &body));
    }
    fn epb(&mut self, iface: u32, ts: u64, caplen: u32, len: u32, data: &[u8]) {
        let mut body = Vec::new();
        for v in [iface, (ts >> 32) as u32, ts as u32, caplen, len] {
            body.extend_from_slice(&self.w32(v));
        }
        body.extend_from_slice(data);
        self.bytes.extend(block(self.big, 6, &body));
    }
    fn spb(&mut self, len: u32, data: &[u8]) {
        let mut body = self.w32(len).to_vec();
        body.extend_from_slice(data);
        self.bytes.extend(block(self.big, 3, &body));
    }
    fn other(&mut self, ty: u32, body: &[u8]) {
        self.bytes.extend(block(self.big, ty, body));
    }
}

#[test]
fn pcapng_sections_interfaces_and_packet_blocks() {
    let (a, b, c) = (frame(60, 6), frame(61, 7), frame(200, 8));
    for big in [false, true] {
        let mut ng = Ng::section(big);
        ng.other(0x8000_0001, b"custom block, skipped");
        ng.idb(1, 0, None);
        ng.idb(1, 0, Some(9)); // nanoseconds
        ng.epb(0, 1_500_000, 60, 60, &a);
        ng.other(5, &[0; 12]); // interface statistics, skipped
        ng.epb(1, 2_000_000_123, 61, 64, &b);
        ng.spb(200, &c);
        // A second section, in the other byte order: interfaces restart.
        let mut second = Ng::section(!big);
        second.idb(1, 128, None);
        second.epb(0, 7, 200, 200, &c);
        ng.bytes.extend(second.bytes);
        let s = Scratch::new(&format!("sections-{big}.pcapng"), &ng.bytes);
        let (packets, error) = read_dpf(&ng.bytes);
        assert!(error.is_none(), "{error:?}");
        assert_eq!(
            packets,
            [
                (60, a.clone()),
                (64, b.clone()),
                (200, c.clone()),
                (200, c[..128].to_vec())
            ]
        );
        // libpcap refuses the change of byte order and of snaplen between
        // sections; up to there it agrees.
        if let Some(pcap) = libpcap_or_skip() {
            let off = pcap.read_offline(&s.path).unwrap();
            assert_eq!(off.packets[..], packets[..3]);
        }
        let mut r = CaptureReader::new(&ng.bytes[..]).unwrap();
        let ts: Vec<i128> =
            std::iter::from_fn(|| r.next_packet().unwrap().map(|p| p.timestamp_ns)).collect();
        assert_eq!(ts, [1_500_000_000, 2_000_000_123, 0, 7_000]);
    }
}

#[test]
fn pcapng_files_libpcap_reads_read_the_same() {
    let (a, b) = (frame(60, 9), frame(90, 10));
    let mut ng = Ng::section(false);
    ng.idb(1, 64, None);
    ng.idb(1, 64, None);
    ng.epb(0, 1, 60, 60, &a);
    ng.epb(1, 2, 64, 90, &b[..64]);
    ng.spb(90, &b[..64]);
    let s = Scratch::new("two-if.pcapng", &ng.bytes);
    let (packets, error) = same_as_libpcap(&s.path);
    assert!(error.is_none(), "{error:?}");
    assert_eq!(packets.len(), 3);
    // Truncated inside the last block: the packets before it, and where.
    let cut = ng.bytes.len() - 6;
    let s = Scratch::new("two-if-trunc.pcapng", &ng.bytes[..cut]);
    let (packets, error) = same_as_libpcap(&s.path);
    assert_eq!(packets.len(), 2);
    let e = error.unwrap();
    assert!(e.to_string().contains("the block of packet 3"), "{e}");
}

#[test]
fn pcapng_interfaces_of_different_link_types_carry_their_own() {
    let a = frame(60, 11);
    let mut ng = Ng::section(false);
    ng.idb(1, 0, None);
    ng.idb(101, 0, None); // raw IP
    ng.epb(0, 1, 60, 60, &a);
    ng.epb(1, 2, 40, 40, &a[14..54]);
    let mut r = CaptureReader::new(&ng.bytes[..]).unwrap();
    let p = r.next_packet().unwrap().unwrap();
    assert_eq!((p.interface, p.link_type), (0, 1));
    let p = r.next_packet().unwrap().unwrap();
    assert_eq!((p.interface, p.link_type, p.data.len()), (1, 101, 40));
}

#[test]
fn malformed_pcapng_blocks_are_placed_and_explained() {
    let a = frame(60, 12);
    // A packet on an interface the section does not describe.
    let mut ng = Ng::section(false);
    ng.idb(1, 0, None);
    let at = ng.bytes.len() as u64;
    ng.epb(3, 1, 60, 60, &a);
    let (_, error) = read_dpf(&ng.bytes);
    let e = error.unwrap();
    assert_eq!(e.offset(), at);
    assert!(
        e.to_string()
            .contains("interface 3, but the section describes 1"),
        "{e}"
    );
    // A packet before any interface.
    let mut ng = Ng::section(false);
    ng.epb(0, 1, 60, 60, &a);
    let (_, error) = read_dpf(&ng.bytes);
    assert!(
        error
            .unwrap()
            .to_string()
            .contains("before any interface description")
    );
    // A captured length past the end of its block.
    let mut ng = Ng::section(false);
    ng.idb(1, 0, None);
    ng.epb(0, 1, 600, 600, &a);
    let (_, error) = read_dpf(&ng.bytes);
    assert!(
        error
            .unwrap()
            .to_string()
            .contains("does not fit in the block")
    );
    // A block length that is not a multiple of 4, and a trailer that
    // disagrees with the header.
    let mut ng = Ng::section(false);
    ng.idb(1, 0, None);
    let at = ng.bytes.len();
    ng.epb(0, 1, 60, 60, &a);
    let mut bad = ng.bytes.clone();
    bad[at + 4] = 99;
    let (_, error) = read_dpf(&bad);
    let e = error.unwrap();
    assert_eq!(e.offset(), at as u64 + 4);
    assert!(e.to_string().contains("expected a multiple of 4"), "{e}");
    let mut bad = ng.bytes.clone();
    let end = bad.len();
    bad[end - 4] = 0x40;
    let (_, error) = read_dpf(&bad);
    assert!(
        error
            .unwrap()
            .to_string()
            .contains("trailer says length 64")
    );
}

/// Every file of the directory `DPF_CAPTURE_DIR` (for instance tcpdump's
/// `tests`, whose captures come from many systems and tools) that libpcap
/// reads as Ethernet, dpf reads to the same packets and stops where
/// libpcap stops. Skipped when the variable is unset.
#[test]
fn every_ethernet_capture_of_a_directory_reads_as_libpcap_reads_it() {
    let Ok(dir) = std::env::var("DPF_CAPTURE_DIR") else {
        eprintln!("skipped: set DPF_CAPTURE_DIR to a directory of captures");
        return;
    };
    let Some(pcap) = libpcap_or_skip() else {
        return;
    };
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    paths.sort();
    let (mut ethernet, mut same, mut stopped) = (0, 0, 0);
    let mut differ = Vec::new();
    for path in &paths {
        let Ok(off) = pcap.read_offline(path) else {
            continue;
        };
        if off.link_type != 1 {
            continue;
        }
        ethernet += 1;
        let bytes = std::fs::read(path).unwrap();
        let (packets, error) = read_dpf(&bytes);
        stopped += usize::from(off.error.is_some());
        if packets == off.packets && error.is_some() == off.error.is_some() {
            same += 1;
        } else {
            differ.push(format!(
                "{}: dpf {} packets ({error:?}), libpcap {} ({:?})",
                path.display(),
                packets.len(),
                off.packets.len(),
                off.error
            ));
        }
    }
    eprintln!(
        "{dir}: {ethernet} Ethernet captures libpcap opens ({stopped} of them stop early with an error); dpf reads {same} identically"
    );
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

/// A capture cut at any byte reads to a prefix of its packets: at a record
/// boundary, cleanly; anywhere else, with `Truncated` at the offset of the
/// record that was cut. Bytes changed at random never make the reader
/// panic, and every error's offset lies inside the input.
#[test]
fn a_capture_cut_or_damaged_anywhere_reads_to_a_prefix_or_a_placed_error() {
    use rand::{Rng, SeedableRng};
    for name in ["lo-snap64.pcap", "two-if.pcapng"] {
        let whole = std::fs::read(data(name)).unwrap();
        let (all, error) = read_dpf(&whole);
        assert!(error.is_none());
        // Where each record or block starts (dumpcap writes little-endian).
        let mut starts = Vec::new();
        let mut r = CaptureReader::new(&whole[..]).unwrap();
        let header_end = r.offset();
        if name.ends_with(".pcapng") {
            let mut at = 0;
            while at < whole.len() {
                starts.push(at as u64);
                at += u32::from_le_bytes(whole[at + 4..at + 8].try_into().unwrap()) as usize;
            }
        } else {
            while let Some(p) = r.next_packet().unwrap() {
                starts.push(p.offset);
            }
        }
        for cut in 1..whole.len() {
            let (packets, error) = read_dpf(&whole[..cut]);
            assert_eq!(packets[..], all[..packets.len()], "{name} cut at {cut}");
            if let Some(e) = &error {
                assert!(e.offset() <= cut as u64, "{name} cut at {cut}: {e}");
                if cut as u64 >= header_end {
                    assert!(
                        matches!(e, CaptureError::Truncated { .. }),
                        "{name} cut at {cut}: {e}"
                    );
                }
            } else {
                // A clean end: the cut fell between two blocks or records.
                assert!(
                    starts.contains(&(cut as u64)),
                    "{name} cut at {cut}: no error after {} packets",
                    packets.len()
                );
            }
        }
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed);
        for _ in 0..2000 {
            let mut bytes = whole.clone();
            for _ in 0..rng.random_range(1..4) {
                let i = rng.random_range(0..bytes.len());
                bytes[i] = rng.random();
            }
            if let (_, Some(e)) = read_dpf(&bytes) {
                assert!(e.offset() <= bytes.len() as u64, "{name}: {e}");
            }
        }
    }
}
