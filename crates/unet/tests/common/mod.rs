//! Helpers shared by the tests that run two hosts in two network
//! namespaces (`netns.rs`, `multihost.rs`), each host on a thread of its own.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

/// How long one phase of a two-host test may take before the other host
/// gives up on it.
pub const PHASE_LIMIT: Duration = Duration::from_secs(15);

/// Set when a host panics, so that the other stops waiting for it.
pub struct OnPanic<'a>(pub &'a AtomicBool);

impl Drop for OnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(true, Ordering::Relaxed);
        }
    }
}

/// One host's end of a rendezvous with the other: `swap` sends a value
/// and waits for the other host's, failing at once if that host is gone.
pub struct Meet<T> {
    tx: mpsc::Sender<T>,
    rx: mpsc::Receiver<T>,
}

/// The two ends of a rendezvous.
pub fn meeting<T>() -> (Meet<T>, Meet<T>) {
    let (t0, r1) = mpsc::channel();
    let (t1, r0) = mpsc::channel();
    (Meet { tx: t0, rx: r0 }, Meet { tx: t1, rx: r1 })
}

impl<T> Meet<T> {
    /// Gives `v` to the other host and takes its value.
    pub fn swap(&self, v: T) -> T {
        let _ = self.tx.send(v);
        self.rx
            .recv_timeout(PHASE_LIMIT)
            .expect("the other host failed or is stuck")
    }
}

/// Whether the `xdp` transport can run on host A's end of `hosts`' veth
/// pair: it opens one there and closes it again. When it cannot for want
/// of privilege, kernel or driver support, prints `SKIP <test>: <reason>`
/// and returns `false`, unless `UNET_REQUIRE_XDP=1`, which makes that a
/// failure; any other error fails the test.
#[allow(dead_code)]
pub fn xdp_or_skip(hosts: &unet::netns::TwoHosts, test: &str) -> bool {
    use std::io::Write as _;
    use unet::transport::{TransportError, XdpTransport};
    let a = &hosts.hosts()[0];
    let opened = a
        .run(|| XdpTransport::open(&a.ifname, a.addr(7999)).map(drop))
        .expect("enter host A's namespace");
    match opened {
        Ok(()) => true,
        Err(e @ TransportError::XdpUnavailable { .. }) => {
            if std::env::var(unet::transport::xdp::REQUIRE_ENV).as_deref() == Ok("1") {
                panic!("{test}: {e} (and {}=1)", unet::transport::xdp::REQUIRE_ENV);
            }
            let line = format!(
                "\nSKIP {test}: {e} (set {}=1 to fail instead)\n",
                unet::transport::xdp::REQUIRE_ENV
            );
            let _ = std::io::stderr().write_all(line.as_bytes());
            false
        }
        Err(e) => panic!("{test}: open the xdp transport: {e}"),
    }
}
