//! What the `xdp` transport says when it cannot run: the error names what
//! is missing (privilege, driver support) or what is wrong (a ring depth),
//! as a typed [`TransportError`], never a panic; and where its program
//! runs (driver or generic hook) and why.
//!
//! The privilege test runs as root by re-running itself as user `nobody`;
//! the driver tests need root and a network namespace (in which one makes
//! a bridge device: Ethernet, with no XDP in its driver; the other opens
//! the transport on veth in each mode). Without root they print why and pass, unless
//! `UNET_REQUIRE_XDP=1`.
#![cfg(not(loom))]

use std::os::unix::process::CommandExt as _;
use std::process::Command;

use unet::Addr;
use unet::netns::TwoHosts;
use unet::transport::{TransportError, XdpConfig, XdpMissing, XdpMode, XdpTransport, xdp};

/// Set in the re-run child: it is the unprivileged side.
const CHILD_ENV: &str = "UNET_XDP_UNPRIVILEGED_CHILD";

fn addr() -> Addr {
    "10.77.0.1:7000".parse().unwrap()
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

fn skip(test: &str, why: &str) {
    if std::env::var(xdp::REQUIRE_ENV).as_deref() == Ok("1") {
        panic!("{test}: {why} (and {}=1)", xdp::REQUIRE_ENV);
    }
    eprintln!(
        "\nSKIP {test}: {why} (set {}=1 to fail instead)",
        xdp::REQUIRE_ENV
    );
}

#[test]
fn without_privilege_the_error_names_it() {
    if !is_root() {
        // Not root: this process is the unprivileged one.
        let e = XdpTransport::open("lo", addr()).unwrap_err();
        assert!(
            matches!(
                &e,
                TransportError::XdpUnavailable { ifname, missing: XdpMissing::Privilege, .. }
                    if ifname == "lo"
            ),
            "{e}"
        );
        assert!(e.to_string().contains("no privilege"), "{e}");
        assert!(e.to_string().contains("run as root"), "{e}");
        if std::env::var(CHILD_ENV).is_ok() {
            println!("checked unprivileged");
        }
        return;
    }
    // Root: the same check as user nobody, in a child.
    let out = Command::new(std::env::current_exe().expect("the test binary"))
        .args([
            "--exact",
            "without_privilege_the_error_names_it",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_ENV, "1")
        .uid(65534)
        .gid(65534)
        .output();
    match out {
        Ok(o) => {
            let text = String::from_utf8_lossy(&o.stdout);
            assert!(
                o.status.success() && text.contains("checked unprivileged"),
                "the unprivileged child: {}\n{}",
                text,
                String::from_utf8_lossy(&o.stderr)
            );
        }
        // The binary may be out of nobody's reach (a private target
        // directory): that is this machine, not the transport.
        Err(e) => skip(
            "without_privilege_the_error_names_it",
            &format!("cannot run the test binary as nobody: {e}"),
        ),
    }
}

#[test]
fn an_interface_without_driver_xdp_is_refused_in_driver_mode_naming_the_driver() {
    let test = "an_interface_without_driver_xdp_is_refused_in_driver_mode_naming_the_driver";
    if !is_root() {
        return skip(test, "not running as root");
    }
    let Some(hosts) = TwoHosts::for_test(test).expect("the namespaces") else {
        return;
    };
    let a = &hosts.hosts()[0];
    let config = XdpConfig {
        mode: XdpMode::Driver,
        ..XdpConfig::default()
    };
    // A bridge device is Ethernet without XDP in its driver (only the
    // kernel's generic hook); it goes with the namespace.
    let made = Command::new("ip")
        .args([
            "-n",
            &a.namespace,
            "link",
            "add",
            "fpbridge0",
            "type",
            "bridge",
        ])
        .status()
        .expect("run ip");
    assert!(made.success(), "ip link add fpbridge0 type bridge");
    let up = Command::new("ip")
        .args(["-n", &a.namespace, "link", "set", "fpbridge0", "up"])
        .status()
        .expect("run ip");
    assert!(up.success());
    let r = a
        .run(|| XdpTransport::open_with("fpbridge0", a.addr(7000), &config).map(|t| t.mode()))
        .expect("enter the namespace");
    match r {
        Err(
            e @ TransportError::XdpUnavailable {
                missing: XdpMissing::Driver,
                ..
            },
        ) => {
            assert!(e.to_string().contains("cannot run on fpbridge0"), "{e}");
            assert!(e.to_string().contains("driver"), "{e}");
        }
        other => panic!(
            "expected a missing driver, got {:?}",
            other.map_err(|e| e.to_string())
        ),
    }
    // Auto falls back to the generic hook on the same device, and says
    // that the driver refused.
    let (mode, why) = a
        .run(|| {
            XdpTransport::open("fpbridge0", a.addr(7000))
                .map(|t| (t.mode(), t.mode_reason().to_string()))
        })
        .expect("enter the namespace")
        .expect("generic mode on the bridge device");
    assert_eq!(mode, XdpMode::Generic);
    assert!(
        why.starts_with("generic (SKB) mode: fpbridge0 refused driver mode ("),
        "{why}"
    );
}

#[test]
fn on_veth_auto_takes_the_generic_hook_and_says_why_while_driver_mode_stays_available() {
    let test = "on_veth_auto_takes_the_generic_hook_and_says_why_while_driver_mode_stays_available";
    if !is_root() {
        return skip(test, "not running as root");
    }
    let Some(hosts) = TwoHosts::for_test(test).expect("the namespaces") else {
        return;
    };
    let a = &hosts.hosts()[0];
    let open = |mode| {
        let config = XdpConfig {
            mode,
            ..XdpConfig::default()
        };
        a.run(|| {
            XdpTransport::open_with(&a.ifname, a.addr(7000), &config)
                .map(|t| (t.mode(), t.mode_reason().to_string()))
        })
        .expect("enter the namespace")
    };
    match open(XdpMode::Auto) {
        Ok((mode, why)) => {
            assert_eq!(mode, XdpMode::Generic, "{why}");
            assert_eq!(
                why,
                format!("generic (SKB) mode: {}", xdp::VETH_GENERIC_WHY)
            );
        }
        Err(e @ TransportError::XdpUnavailable { .. }) => return skip(test, &e.to_string()),
        Err(e) => panic!("{test}: {e}"),
    }
    let (mode, why) = open(XdpMode::Driver).expect("veth runs XDP in its driver");
    assert_eq!(
        (mode, why.as_str()),
        (XdpMode::Driver, "driver mode: asked for")
    );
    let (mode, why) = open(XdpMode::Generic).expect("the generic hook");
    assert_eq!(
        (mode, why.as_str()),
        (XdpMode::Generic, "generic (SKB) mode: asked for")
    );
}

#[test]
fn bad_sizes_and_names_are_refused_before_any_system_call() {
    for (rx, tx) in [(1000, 1024), (2048, 32), (65536, 1024)] {
        let config = XdpConfig {
            rx_frames: rx,
            tx_frames: tx,
            ..XdpConfig::default()
        };
        let e = XdpTransport::open_with("lo", addr(), &config).unwrap_err();
        assert!(
            matches!(e, TransportError::Config { kind: "xdp", .. }),
            "{e}"
        );
        assert!(
            e.to_string().contains("power of two from 64 to 32768"),
            "{e}"
        );
    }
    for name in ["", "a-name-that-is-far-too-long", "nul\0"] {
        let e = XdpTransport::open(name, addr()).unwrap_err();
        assert!(
            matches!(e, TransportError::Config { kind: "xdp", .. }),
            "{e}"
        );
    }
}
