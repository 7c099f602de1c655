//! `fastpath demo` from the outside: numeric flags are checked before
//! anything runs, `--json` gives every figure as a number or as null with
//! the reason, and SIGINT or SIGTERM during a `--netns` run removes the
//! network namespaces before the process exits.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{fastpath, json_error};

#[test]
fn zero_rounds_are_refused_before_anything_runs() {
    let start = Instant::now();
    let (ok, out, err) = fastpath(&["demo", "--rounds", "0"]);
    assert!(!ok);
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("invalid value '0' for '--rounds <ROUNDS>': 0 is not in 1..=2147483647"),
        "{err}"
    );
    // Refused by the argument parser, not after the cells have spun.
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[test]
fn a_message_count_off_the_burst_is_refused_with_the_rule() {
    let (ok, out, err) = fastpath(&["demo", "--messages", "1"]);
    assert!(!ok);
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains(
            "error: invalid value '1' for '--messages <MESSAGES>': must be a positive \
             multiple of 25, the burst size (messages go in bursts of 25, each \
             acknowledged); try 25"
        ),
        "{err}"
    );
}

/// Every cell of a JSON table: a number, or null with a reason.
fn check_cells(table: &serde_json::Value, name: &str, rows: usize, columns: &[&str]) {
    let got = table["rows"]
        .as_array()
        .unwrap_or_else(|| panic!("{name}: no rows"));
    assert_eq!(got.len(), rows, "{name}");
    for row in got {
        assert!(row["bytes"].is_u64(), "{name}: {row}");
        for c in columns {
            let cell = &row[*c];
            match cell["value"].as_f64() {
                Some(v) => assert!(v.is_finite() && v >= 0.0, "{name}.{c}: {cell}"),
                None => assert!(
                    cell["value"].is_null() && cell["reason"].is_string(),
                    "{name}.{c}: {cell}"
                ),
            }
        }
    }
}

/// How far above memcpy of the same bytes the demo lets U-Net's rate
/// stand (`MAX_SHARE_OF_MEMCPY` in `demo.rs`).
const MAX_SHARE_OF_MEMCPY: f64 = 1.25;

/// No bandwidth row of a `--json` document holds an impossible figure: a
/// U-Net rate more than [`MAX_SHARE_OF_MEMCPY`] times the memcpy peer's,
/// a standard applet's share of U-Net above 100% (it adds work to U-Net's
/// path), or a share of a U-Net rate the row does not show.
fn check_bandwidth_is_possible(doc: &serde_json::Value) {
    let v = |row: &serde_json::Value, key: &str| row[key]["value"].as_f64();
    for row in doc["bandwidth"]["rows"].as_array().expect("bandwidth rows") {
        let unet = v(row, "unet_app_ack");
        if let (Some(u), Some(m)) = (unet, v(row, "memcpy")) {
            assert!(u <= m * MAX_SHARE_OF_MEMCPY, "U-Net above memcpy: {row}");
        }
        if let Some(share) = v(row, "unet_per_memcpy") {
            assert!(share <= MAX_SHARE_OF_MEMCPY * 100.0, "{row}");
        }
        for key in ["standard_per_unet", "standard_lent_per_unet"] {
            if let Some(share) = v(row, key) {
                assert!(unet.is_some(), "{key} of a U-Net rate not shown: {row}");
                assert!(share <= 100.0, "{key} above U-Net: {row}");
            }
        }
    }
}

#[test]
fn json_on_loop_has_every_figure_or_a_reason() {
    let (ok, out, err) = fastpath(&["demo", "--rounds", "10", "--messages", "25", "--json"]);
    assert!(ok, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).expect("stdout is one JSON document");
    assert_eq!(doc["transport"], "loop");
    assert!(doc["netns"].is_null());
    assert_eq!(doc["rounds"], 10);
    // 10 round trips: five batches of two, and the header says so.
    assert_eq!(
        (doc["batches"].as_u64(), doc["batch"].as_u64()),
        (Some(5), Some(2))
    );
    assert!(
        doc["latency"]["title"]
            .as_str()
            .unwrap()
            .contains("10 round trips per cell: the median of 5 batch means of 2"),
        "{}",
        doc["latency"]["title"]
    );
    check_cells(
        &doc["latency"],
        "latency",
        5,
        &[
            "unet",
            "standard_applet",
            "standard_lent_applet",
            "simple_applet",
            "applet_ping_pong",
            "ring",
            "udp",
            "udp_blocking",
            "unix",
            "unet_per_ring",
            "udp_per_unet",
            "udp_blocking_per_unet",
            "standard_per_unet",
            "standard_lent_per_unet",
        ],
    );
    check_cells(
        &doc["applet_cost"],
        "applet_cost",
        5,
        &["standard_applet", "standard_lent_applet", "simple_applet"],
    );
    check_cells(
        &doc["bandwidth"],
        "bandwidth",
        5,
        &[
            "unet_app_ack",
            "standard_app_ack",
            "standard_lent_app_ack",
            "applet_tokens",
            "per_tx_25",
            "applet_generated",
            "memcpy",
            "unet_per_memcpy",
            "standard_per_unet",
            "standard_lent_per_unet",
        ],
    );
    check_bandwidth_is_possible(&doc);
    assert_eq!(doc["messages"], 25);
    // The two threads ran pinned to the first two CPUs this process may
    // use, and the document says which (null with only one).
    let allowed = allowed_cpus();
    if allowed.len() >= 2 {
        assert_eq!(doc["cpus"], serde_json::json!([allowed[0], allowed[1]]));
    } else {
        assert!(doc["cpus"].is_null());
    }
    // Progress went to standard error, not into the document.
    assert!(err.contains("fastpath demo:"), "{err}");
}

/// The CPUs this process may run on, from /proc (`Cpus_allowed_list`,
/// e.g. `0-1,4`).
fn allowed_cpus() -> Vec<u64> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim();
    list.split(',')
        .flat_map(|r| {
            let (a, b) = r.split_once('-').unwrap_or((r, r));
            a.parse::<u64>().unwrap()..=b.parse::<u64>().unwrap()
        })
        .collect()
}

#[test]
fn no_pin_leaves_the_threads_to_the_scheduler_and_says_so() {
    let (ok, out, err) = fastpath(&[
        "demo",
        "--rounds",
        "5",
        "--messages",
        "25",
        "--json",
        "--no-pin",
    ]);
    assert!(ok, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).expect("stdout is one JSON document");
    assert!(doc["cpus"].is_null(), "{}", doc["cpus"]);
}

/// The namespaces of process `pid` that `ip netns list` shows.
fn namespaces_of(pid: u32) -> Vec<String> {
    let out = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("runs ip netns list");
    let prefix = format!("unet{pid}-");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&prefix))
        .map(str::to_owned)
        .collect()
}

/// Whether this machine can make network namespaces; if not, the reason
/// is printed and the test skips, unless `UNET_REQUIRE_NETNS=1`.
fn netns_available(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let ip = Command::new("ip")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if root && ip {
        return true;
    }
    let why = if root { "`ip` is missing" } else { "not root" };
    assert!(
        std::env::var("UNET_REQUIRE_NETNS").as_deref() != Ok("1"),
        "{test}: {why}, and UNET_REQUIRE_NETNS=1"
    );
    eprintln!("SKIP {test}: {why} (set UNET_REQUIRE_NETNS=1 to fail instead)");
    false
}

#[test]
fn a_signal_during_a_netns_run_removes_the_namespaces() {
    if !netns_available("a_signal_during_a_netns_run_removes_the_namespaces") {
        return;
    }
    for (signal, code) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_fastpath"))
            .args(["demo", "--transport", "udp", "--netns"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starts fastpath demo");
        let pid = child.id();
        let deadline = Instant::now() + Duration::from_secs(60);
        while namespaces_of(pid).len() < 2 {
            if Instant::now() > deadline || child.try_wait().unwrap().is_some() {
                let _ = child.kill();
                panic!("the namespaces of fastpath demo --netns did not appear");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(pid as i32, signal) }, 0);
        let status = child.wait_with_output().expect("fastpath demo exits");
        let err = String::from_utf8_lossy(&status.stderr);
        assert_eq!(status.status.code(), Some(code), "{err}");
        assert!(err.contains("removed network namespaces unet"), "{err}");
        assert_eq!(namespaces_of(pid), Vec::<String>::new(), "{err}");
    }
}

#[test]
fn the_raw_frame_transports_need_netns_and_say_so() {
    for t in ["packet", "xdp"] {
        let (ok, out, err) = fastpath(&["demo", "--transport", t]);
        assert!(!ok);
        assert!(out.is_empty(), "{out}");
        assert!(
            err.contains(&format!(
                "the {t} transport sends raw frames on a network interface: add --netns"
            )),
            "{err}"
        );
    }
}

/// Over `xdp` between two namespaces, the demo adds the comparison of the
/// three transports that cross the veth pair, every cell a number or null
/// with a reason. Root only (skipped with the reason otherwise, unless
/// `UNET_REQUIRE_NETNS=1`).
#[test]
fn the_xdp_demo_sets_udp_packet_and_xdp_side_by_side() {
    if !netns_available("the_xdp_demo_sets_udp_packet_and_xdp_side_by_side") {
        return;
    }
    let (ok, out, err) = fastpath(&[
        "demo",
        "--transport",
        "xdp",
        "--netns",
        "--rounds",
        "5",
        "--messages",
        "25",
        "--json",
    ]);
    assert!(ok, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).expect("stdout is one JSON document");
    assert_eq!(doc["transport"], "xdp");
    // The same veth MTU as udp and packet: xdp carries a 16 KiB message
    // in one multi-buffer frame.
    assert_eq!(doc["netns"]["mtu"], 16_500);
    check_cells(&doc["latency"], "latency", 5, &["unet", "udp"]);
    check_cells(&doc["bandwidth"], "bandwidth", 4, &["unet_app_ack"]);
    check_bandwidth_is_possible(&doc);
    check_cells(
        &doc["transports_latency"],
        "transports_latency",
        3,
        &["rtt_udp", "rtt_packet", "rtt_xdp", "rtt_xdp_per_udp"],
    );
    check_cells(
        &doc["transports_bandwidth"],
        "transports_bandwidth",
        3,
        &["bw_udp", "bw_packet", "bw_xdp", "bw_xdp_per_udp"],
    );
    // The same message sizes as udp and packet.
    let sizes = |table: &str| -> Vec<u64> {
        doc[table]["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["bytes"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(sizes("latency"), [0, 56, 57, 1024, 4096]);
    assert_eq!(sizes("bandwidth"), [64, 1024, 4096, 16384]);
    let big = &doc["bandwidth"]["rows"][3]["unet_app_ack"];
    assert!(big["value"].as_f64().is_some(), "16 KiB over xdp: {big}");
}

/// With `--json`, a demo that cannot run prints the error object on stdout
/// (and exits 1, the message on stderr, as without `--json`).
#[test]
fn json_errors_are_one_object_on_stdout() {
    for (args, said) in [
        (&["demo", "--transport", "packet"][..], "add --netns"),
        (
            &["demo", "--netns"][..],
            "use --transport udp, packet or xdp",
        ),
    ] {
        let (command, message) = json_error(args);
        assert_eq!(command, "demo");
        assert!(message.contains(said), "{message}");
    }
}

/// `--help` says what `--rounds` times: whole batches, the rest left out.
#[test]
fn the_help_says_what_rounds_times() {
    let (ok, out, err) = fastpath(&["demo", "--help"]);
    assert!(ok, "{err}");
    for said in [
        "timed in whole batches; the figure is the median of the batch means",
        "`--rounds 49` 5 batches of 9, 45 round trips timed",
        "Messages timed per bandwidth cell",
    ] {
        assert!(out.contains(said), "{said:?} missing from:\n{out}");
    }
    assert!(
        !out.contains("Round trips per latency cell (at least 1), timed in batches of up"),
        "{out}"
    );
}
