//! `fastpath ilp demo`: output a person reads (bytes in hex, steps by
//! name, no Rust debug formatting, the throughput table once), and
//! `--json` with the same results for scripts.

mod common;
use common::fastpath;

#[test]
fn demo_prints_readable_results_and_the_table_once() {
    let (ok, out, err) = fastpath(&["ilp", "demo"]);
    assert!(ok, "{err}");
    // RFC 1071's example sums to 0x220d; the CRC check string's CRC-32.
    assert!(out.contains("checksum 0x220d"), "{out}");
    assert!(out.contains("crc32 0xcbf43926"), "{out}");
    assert!(out.contains("00 01 f2 03 f4 f5 f6 f7"), "{out}");
    assert!(
        out.contains("xor \"secret\", then crc32, then bswap16, then copy, then checksum"),
        "{out}"
    );
    // No Rust debug forms: Some(..)/None, variant names, byte lists.
    for debug in ["Some(", "None", "Xor(", "Crc32", "[0", "[115"] {
        assert!(!out.contains(debug), "debug form {debug:?} in:\n{out}");
    }
    // The table once: one header, one row per pipeline and placement, on
    // stdout; stderr has no table rows.
    assert_eq!(out.matches("hand-fused").count(), 1, "{out}");
    assert_eq!(out.matches("copy+crc32 ").count(), 3, "{out}");
    assert!(!err.contains("copy+crc32"), "table rows on stderr:\n{err}");
}

#[test]
fn demo_json_has_the_results() {
    let (ok, out, err) = fastpath(&["ilp", "demo", "--json"]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("ilp demo --json prints JSON");
    let p = &v["pipelines"];
    assert_eq!(p[0]["name"], "copy+checksum");
    assert_eq!(p[0]["checksum"], "0x220d");
    assert_eq!(p[0]["crc32"], serde_json::Value::Null);
    assert_eq!(p[2]["crc32"], "0xcbf43926");
    assert_eq!(v["composed"]["steps"][0], "xor \"secret\"");
    let rows = v["throughput"].as_array().unwrap();
    assert_eq!(rows.len(), 9);
    for r in rows {
        for k in [
            "separate_mb_s",
            "hand_fused_mb_s",
            "ilp_mb_s",
            "ilp_nt_mb_s",
        ] {
            assert!(r[k].as_f64().is_some_and(|x| x > 0.0), "{k} in {r}");
        }
    }
}
