//! Two hosts on one machine: two Linux network namespaces joined by a veth
//! pair (ip-netns(8), veth(4), setns(2)), for running two engines as if
//! on two machines. unet's multi-host tests (`tests/netns.rs`) and
//! `fastpath demo --netns` use it.
//!
//! [`TwoHosts::create`] makes two namespaces with names unique to this
//! process (`unet<pid>-<n>a` and `unet<pid>-<n>b`), a veth pair
//! ([`IFNAMES`]) with one end in each, the addresses 10.77.`x`.1/24 and
//! 10.77.`x`.2/24, fixed MACs ([`MacAddr::from_ip`] of the address, so
//! that a `packet` transport can be told its neighbour's MAC up front),
//! and sets the links and `lo` up. Dropping it deletes both namespaces,
//! which deletes the veth pair with them; that happens on a panic too,
//! when the value is dropped while unwinding. A process that is stopped
//! by a signal never drops it: its signal handler (e.g. `fastpath demo`'s,
//! on SIGINT or SIGTERM) calls [`remove_all`], which deletes every
//! namespace this process made and still has. Namespaces left by a process
//! that was killed outright (SIGKILL) are deleted by the next
//! [`TwoHosts::create`] whose pid check finds their process gone.
//!
//! A socket belongs to the network namespace of the thread that created
//! it, and stays there when other threads use it. So a host's transport is
//! opened on a thread inside its namespace ([`Host::run`], [`in_namespace`],
//! [`TwoHosts::run_both`]), after which the engine and its endpoints may
//! move to any thread. The process's own namespace is never changed: each
//! of these functions enters the namespace on a thread of its own.
//!
//! Everything is done with the `ip` command (iproute2) and needs root
//! (`CAP_SYS_ADMIN` for the namespaces, `CAP_NET_RAW` for the `packet`
//! transport); [`available`] says why not when it cannot work. A failed
//! command is a [`NetnsError::Command`] naming the command and quoting its
//! standard error. This module's only `unsafe` is the `setns` and
//! `geteuid` calls.

use std::fs::File;
use std::io::{self, Write as _};
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, mpsc};

use thiserror::Error;

use crate::frame::{Addr, MacAddr};

/// Where `ip netns` keeps its named namespaces.
pub const NETNS_DIR: &str = "/var/run/netns";

/// The veth ends' names: host A's, then host B's (each in its own
/// namespace, so the names never clash with the machine's interfaces).
pub const IFNAMES: [&str; 2] = ["unet0", "unet1"];

/// The veth pair's MTU unless [`TwoHosts::with_mtu`] says otherwise.
pub const DEFAULT_MTU: u32 = 1500;

/// The environment variable that turns a missing capability into a test
/// failure ([`TwoHosts::for_test`]); CI sets it to `1`.
pub const REQUIRE_ENV: &str = "UNET_REQUIRE_NETNS";

/// The prefix of the namespaces this module creates.
const PREFIX: &str = "unet";

/// Errors of setting up, entering or removing the namespaces.
#[derive(Debug, Error)]
pub enum NetnsError {
    /// The machine cannot do it (not root, no `ip`), and why.
    #[error("network namespaces are not available: {0}")]
    Unavailable(String),
    /// `ip` could not be started.
    #[error("cannot run `{command}`: {source}")]
    Spawn {
        /// The command line.
        command: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// `ip` ran and failed.
    #[error("`{command}` failed ({status}): {stderr}")]
    Command {
        /// The command line.
        command: String,
        /// Its exit status.
        status: ExitStatus,
        /// What it wrote to standard error.
        stderr: String,
    },
    /// A namespace name that `ip netns` would not accept or that names a
    /// path outside [`NETNS_DIR`].
    #[error("bad network namespace name {0:?}")]
    BadName(String),
    /// The namespace's file could not be opened (it does not exist?).
    #[error("open network namespace {name} ({}): {source}", path.display())]
    Open {
        /// The namespace.
        name: String,
        /// Its file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// `setns(2)` refused.
    #[error("enter network namespace {name} (setns): {source}")]
    Enter {
        /// The namespace.
        name: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// No thread could be started to run in the namespace.
    #[error("start a thread for network namespace {name}: {source}")]
    Thread {
        /// The namespace.
        name: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

/// Whether this process can create network namespaces with `ip`, and if
/// not, why (not root, no `ip`).
pub fn available() -> Result<(), String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err(
            "not running as root (network namespaces need CAP_SYS_ADMIN, \
                    the packet transport CAP_NET_RAW)"
                .into(),
        );
    }
    match Command::new("ip").arg("-V").output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!("`ip -V` failed ({})", o.status)),
        Err(e) => Err(format!("`ip` (iproute2) is not available: {e}")),
    }
}

/// Runs `ip args…`; the error names the command and quotes its stderr.
fn ip(args: &[&str]) -> Result<(), NetnsError> {
    let command = format!("ip {}", args.join(" "));
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|source| NetnsError::Spawn {
            command: command.clone(),
            source,
        })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(NetnsError::Command {
            command,
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        })
    }
}

/// Checks that `name` is a plain file name (what `ip netns add` accepts).
fn check_name(name: &str) -> Result<(), NetnsError> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return Err(NetnsError::BadName(name.to_owned()));
    }
    Ok(())
}

/// Moves the calling thread into network namespace `name` (one made by
/// `ip netns add`). Only this thread changes namespace; the sockets it
/// creates afterwards belong to `name`. Do not call it on a thread that
/// must stay where it is (the main thread): use [`in_namespace`].
pub fn enter(name: &str) -> Result<(), NetnsError> {
    check_name(name)?;
    let path = Path::new(NETNS_DIR).join(name);
    let file = File::open(&path).map_err(|source| NetnsError::Open {
        name: name.to_owned(),
        path: path.clone(),
        source,
    })?;
    // SAFETY: setns on a descriptor we own and keep open for the call;
    // CLONE_NEWNET changes only the calling thread's network namespace and
    // no memory is involved.
    let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    if r != 0 {
        return Err(NetnsError::Enter {
            name: name.to_owned(),
            source: io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// Runs `f` on a new thread that has entered network namespace `name`,
/// and returns what it returns; a panic in `f` is resumed on the caller.
///
/// ```no_run
/// use unet::netns::{TwoHosts, in_namespace};
/// use unet::transport::{Transport, UdpTransport};
/// let hosts = TwoHosts::create()?;
/// let [a, _b] = hosts.hosts();
/// // The socket is created in host A's namespace and stays there.
/// let t = in_namespace(&a.namespace, || UdpTransport::bind(a.addr(7000)))??;
/// assert_eq!(t.local(), a.addr(7000));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn in_namespace<T: Send>(name: &str, f: impl FnOnce() -> T + Send) -> Result<T, NetnsError> {
    check_name(name)?;
    std::thread::scope(|s| {
        let h = std::thread::Builder::new()
            .name(format!("netns-{name}"))
            .spawn_scoped(s, || {
                enter(name)?;
                Ok(f())
            })
            .map_err(|source| NetnsError::Thread {
                name: name.to_owned(),
                source,
            })?;
        h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}

/// One of the two hosts: its namespace and its end of the veth pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// The network namespace (`ip netns` name).
    pub namespace: String,
    /// Its end of the veth pair ([`IFNAMES`]).
    pub ifname: String,
    /// Its address on the veth link (prefix /24).
    pub ip: Ipv4Addr,
    /// Its end's MAC: [`MacAddr::from_ip`] of [`Host::ip`].
    pub mac: MacAddr,
}

impl Host {
    /// Its unet address with UDP port `port`.
    pub fn addr(&self, port: u16) -> Addr {
        Addr::new(self.ip, port)
    }

    /// Runs `f` on a thread inside this host's namespace ([`in_namespace`]).
    pub fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> Result<T, NetnsError> {
        in_namespace(&self.namespace, f)
    }
}

/// Two network namespaces joined by a veth pair, deleted on drop.
#[derive(Debug)]
pub struct TwoHosts {
    hosts: [Host; 2],
    mtu: u32,
    /// Transmit and receive queues of each veth end.
    queues: u32,
    /// How many of the namespaces may exist (a half-made pair deletes
    /// what it made).
    made: usize,
}

/// Pairs made by this process, for unique names and subnets.
static NEXT: AtomicU32 = AtomicU32::new(0);

/// The namespaces this process has made and not yet deleted, for
/// [`remove_all`]. A name is added before `ip netns add` runs and taken out
/// once `ip netns del` has, both under the lock, so that a [`remove_all`]
/// running on a signal's thread never misses one being made.
static LIVE: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Runs `ip netns add name`, recording `name` for [`remove_all`].
fn add_namespace(name: &str) -> Result<(), NetnsError> {
    let mut live = LIVE.lock().unwrap_or_else(|p| p.into_inner());
    live.push(name.to_owned());
    ip(&["netns", "add", name])
}

/// Runs `ip netns del name` (which deletes the veth end inside it), and
/// forgets `name`.
fn delete_namespace(name: &str) -> Result<(), NetnsError> {
    let mut live = LIVE.lock().unwrap_or_else(|p| p.into_inner());
    live.retain(|n| n != name);
    if Path::new(NETNS_DIR).join(name).exists() {
        ip(&["netns", "del", name])
    } else {
        Ok(())
    }
}

/// Deletes every namespace this process made and has not deleted yet (and
/// with them the veth pairs), for a signal handler that is about to end
/// the process: the [`TwoHosts`] values that own them are never dropped
/// then. Holds the lock until the process exits, so no namespace is made
/// after the cleanup: a thread that tries waits. Returns the names
/// deleted, and the errors of those that could not be.
pub fn remove_all() -> (Vec<String>, Vec<NetnsError>) {
    let mut live = LIVE.lock().unwrap_or_else(|p| p.into_inner());
    let (mut done, mut failed) = (Vec::new(), Vec::new());
    for name in live.drain(..) {
        if !Path::new(NETNS_DIR).join(&name).exists() {
            continue;
        }
        match ip(&["netns", "del", &name]) {
            Ok(()) => done.push(name),
            Err(e) => failed.push(e),
        }
    }
    // Not released: the caller exits the process next.
    std::mem::forget(live);
    (done, failed)
}

impl TwoHosts {
    /// Creates the two hosts with a veth MTU of [`DEFAULT_MTU`].
    pub fn create() -> Result<TwoHosts, NetnsError> {
        Self::with_mtu(DEFAULT_MTU)
    }

    /// Creates the two hosts with a veth MTU of `mtu` (e.g. a jumbo MTU,
    /// so that a `packet` transport carries larger messages). If a step
    /// fails, what was made is deleted and the error names the step.
    pub fn with_mtu(mtu: u32) -> Result<TwoHosts, NetnsError> {
        Self::with_mtu_and_queues(mtu, 1)
    }

    /// Creates the two hosts with a veth MTU of `mtu` and `queues`
    /// transmit and receive queues on each end (at least 1): veth hands a
    /// frame to the receive queue numbered as the transmit queue the
    /// sender's kernel picked for its flow, so that different flows land
    /// on different queues.
    pub fn with_mtu_and_queues(mtu: u32, queues: u32) -> Result<TwoHosts, NetnsError> {
        available().map_err(NetnsError::Unavailable)?;
        remove_stale();
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        // Each pair has its own routing tables, so the subnet need not be
        // unique; varying it keeps captures of different pairs apart.
        let subnet = (n % 254 + 1) as u8;
        let host = |h: usize, side: char| {
            let ip = Ipv4Addr::new(10, 77, subnet, h as u8 + 1);
            Host {
                namespace: format!("{PREFIX}{pid}-{n}{side}"),
                ifname: IFNAMES[h].to_owned(),
                ip,
                mac: MacAddr::from_ip(ip),
            }
        };
        let mut pair = TwoHosts {
            hosts: [host(0, 'a'), host(1, 'b')],
            mtu,
            queues: queues.max(1),
            made: 0,
        };
        pair.build()?;
        Ok(pair)
    }

    fn build(&mut self) -> Result<(), NetnsError> {
        let [a, b] = &self.hosts;
        for h in [a, b] {
            // A leftover of a killed run with the same pid and number.
            delete_namespace(&h.namespace)?;
        }
        self.made = 1;
        add_namespace(&a.namespace)?;
        self.made = 2;
        add_namespace(&b.namespace)?;
        let (mtu, queues) = (self.mtu.to_string(), self.queues.to_string());
        let (mac_a, mac_b) = (a.mac.to_string(), b.mac.to_string());
        let mut args: Vec<&str> = vec!["-n", &a.namespace, "link", "add"];
        for (h, mac) in [(a, &mac_a), (b, &mac_b)] {
            if h == b {
                args.extend(["type", "veth", "peer", "name"]);
            }
            args.extend([h.ifname.as_str(), "address", mac, "mtu", &mtu]);
            args.extend(["numtxqueues", &queues, "numrxqueues", &queues]);
        }
        args.extend(["netns", &b.namespace]);
        ip(&args)?;
        for h in [a, b] {
            let ns = h.namespace.as_str();
            let cidr = format!("{}/24", h.ip);
            ip(&["-n", ns, "addr", "add", &cidr, "dev", &h.ifname])?;
            ip(&["-n", ns, "link", "set", &h.ifname, "up"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        Ok(())
    }

    /// For a test: the hosts, or `Ok(None)` after printing `SKIP <test>:
    /// <reason>` to standard error when this machine cannot make them; with
    /// [`REQUIRE_ENV`]` = 1` that is an error instead.
    pub fn for_test(test: &str) -> Result<Option<TwoHosts>, NetnsError> {
        Self::for_test_with(test, DEFAULT_MTU, 1)
    }

    /// [`TwoHosts::for_test`] with a veth MTU of `mtu` and `queues` queues
    /// on each end ([`TwoHosts::with_mtu_and_queues`]).
    pub fn for_test_with(
        test: &str,
        mtu: u32,
        queues: u32,
    ) -> Result<Option<TwoHosts>, NetnsError> {
        match TwoHosts::with_mtu_and_queues(mtu, queues) {
            Ok(h) => Ok(Some(h)),
            Err(e) if std::env::var(REQUIRE_ENV).as_deref() == Ok("1") => Err(e),
            Err(e) => {
                // Straight to the process's stderr, past the test
                // harness's capture, so that a skip shows in a normal run.
                let line = format!("\nSKIP {test}: {e} (set {REQUIRE_ENV}=1 to fail instead)\n");
                let _ = io::stderr().write_all(line.as_bytes());
                Ok(None)
            }
        }
    }

    /// Host A (`hosts()[0]`) and host B.
    pub fn hosts(&self) -> &[Host; 2] {
        &self.hosts
    }

    /// The veth pair's MTU.
    pub fn mtu(&self) -> u32 {
        self.mtu
    }

    /// The transmit and receive queues of each veth end.
    pub fn queues(&self) -> u32 {
        self.queues
    }

    /// Runs `fa` in host A and `fb` in host B at once, each on a thread of
    /// its own; both start only once both threads are in their namespaces.
    /// A panic in either is resumed here once both have finished (so the
    /// other one must not wait for it forever).
    pub fn run_both<A: Send, B: Send>(
        &self,
        fa: impl FnOnce() -> A + Send,
        fb: impl FnOnce() -> B + Send,
    ) -> Result<(A, B), NetnsError> {
        let [ha, hb] = &self.hosts;
        std::thread::scope(|s| {
            let a = spawn_gated(s, ha, fa)?;
            let b = match spawn_gated(s, hb, fb) {
                Ok(b) => b,
                Err(e) => {
                    let _ = a.go.send(false);
                    return Err(e);
                }
            };
            let (ra, rb) = (a.entered(), b.entered());
            let go = ra.is_ok() && rb.is_ok();
            let _ = a.go.send(go);
            let _ = b.go.send(go);
            let (ja, jb) = (a.handle.join(), b.handle.join());
            ra?;
            rb?;
            match (ja, jb) {
                (Ok(Some(a)), Ok(Some(b))) => Ok((a, b)),
                (Err(p), _) | (_, Err(p)) => std::panic::resume_unwind(p),
                // Not reached: both were told to go.
                _ => Err(NetnsError::Thread {
                    name: ha.namespace.clone(),
                    source: io::Error::other("a host did not run"),
                }),
            }
        })
    }
}

/// A thread in a host's namespace that runs its function once told to go.
struct Gated<'scope, T> {
    handle: std::thread::ScopedJoinHandle<'scope, Option<T>>,
    entered: mpsc::Receiver<Result<(), NetnsError>>,
    go: mpsc::Sender<bool>,
    name: String,
}

impl<T> Gated<'_, T> {
    /// Whether the thread entered its namespace.
    fn entered(&self) -> Result<(), NetnsError> {
        self.entered.recv().unwrap_or_else(|_| {
            Err(NetnsError::Thread {
                name: self.name.clone(),
                source: io::Error::other("the thread ended before entering"),
            })
        })
    }
}

fn spawn_gated<'scope, T: Send + 'scope>(
    s: &'scope std::thread::Scope<'scope, '_>,
    host: &Host,
    f: impl FnOnce() -> T + Send + 'scope,
) -> Result<Gated<'scope, T>, NetnsError> {
    let (entered_tx, entered) = mpsc::channel();
    let (go, go_rx) = mpsc::channel::<bool>();
    let name = host.namespace.clone();
    let ns = name.clone();
    let handle = std::thread::Builder::new()
        .name(format!("netns-{name}"))
        .spawn_scoped(s, move || {
            let _ = entered_tx.send(enter(&ns));
            (go_rx.recv() == Ok(true)).then(f)
        })
        .map_err(|source| NetnsError::Thread {
            name: name.clone(),
            source,
        })?;
    Ok(Gated {
        handle,
        entered,
        go,
        name,
    })
}

impl Drop for TwoHosts {
    fn drop(&mut self) {
        // Deleting a namespace deletes its end of the veth pair, and the
        // other end with it.
        for h in &self.hosts[..self.made] {
            if let Err(e) = delete_namespace(&h.namespace) {
                let _ = writeln!(io::stderr(), "unet::netns cleanup: {e}");
            }
        }
    }
}

/// The pid in a name this module made (`unet<pid>-<n><a|b>`), if it is one.
fn owner_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(PREFIX)?;
    let (pid, tail) = rest.split_once('-')?;
    let (n, side) = tail.split_at(tail.len().checked_sub(1)?);
    let well_formed = !n.is_empty()
        && n.bytes().all(|b| b.is_ascii_digit())
        && matches!(side, "a" | "b")
        && pid.bytes().all(|b| b.is_ascii_digit());
    if well_formed { pid.parse().ok() } else { None }
}

/// Deletes the namespaces of processes that no longer run (best effort).
fn remove_stale() {
    let Ok(dir) = std::fs::read_dir(NETNS_DIR) else {
        return;
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(pid) = owner_pid(name)
            && !Path::new(&format!("/proc/{pid}")).exists()
        {
            let _ = ip(&["netns", "del", name]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_leave_the_namespace_directory_are_refused() {
        for bad in ["", ".", "..", "../etc", "a/b", "x\0y"] {
            assert!(
                matches!(enter(bad), Err(NetnsError::BadName(n)) if n == bad),
                "{bad:?}"
            );
            assert!(matches!(
                in_namespace(bad, || ()),
                Err(NetnsError::BadName(_))
            ));
        }
    }

    #[test]
    fn a_missing_namespace_is_an_open_error_naming_it() {
        let e = in_namespace("unet-no-such-namespace", || ()).unwrap_err();
        assert!(matches!(&e, NetnsError::Open { name, .. } if name == "unet-no-such-namespace"));
        assert!(
            e.to_string()
                .contains("/var/run/netns/unet-no-such-namespace"),
            "{e}"
        );
    }

    #[test]
    fn only_names_of_this_module_are_claimed_for_cleanup() {
        assert_eq!(owner_pid("unet123-0a"), Some(123));
        assert_eq!(owner_pid("unet123-17b"), Some(123));
        for other in [
            "unet123-0c",
            "unet123-a",
            "unet-0a",
            "unetx-0a",
            "fpA1230",
            "unet123",
        ] {
            assert_eq!(owner_pid(other), None, "{other}");
        }
    }

    #[test]
    fn a_failed_command_names_itself_and_quotes_its_stderr() {
        if available().is_err() {
            return; // `ip` may be missing; the message is what is tested
        }
        let e = ip(&["link", "show", "dev", "unet-no-such-link"]).unwrap_err();
        let NetnsError::Command {
            command, stderr, ..
        } = &e
        else {
            panic!("{e:?}")
        };
        assert_eq!(command, "ip link show dev unet-no-such-link");
        assert!(!stderr.is_empty());
        assert!(e.to_string().contains(stderr.as_str()));
    }
}
