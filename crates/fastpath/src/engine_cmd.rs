//! `fastpath engine`: the unet engine as a daemon, serving endpoints to
//! applications in other processes over a Unix socket, so that an
//! application's endpoint lives in its own process while one engine serves
//! them all (the protocol and the trust model are in `unet::daemon`, the
//! application's side in `unet::client`).
//!
//! The engine gets threads of its own (`--threads`), polling every
//! endpoint's transmit queue and the transport (`loop`: frames between the
//! endpoints of this engine; `udp`: kernel UDP sockets). The command prints
//! a line for every connection, endpoint and disconnection, and runs until
//! SIGINT or SIGTERM, which it waits for with `sigwait` (both are blocked
//! in every thread, so no handler runs in the middle of anything); then it
//! closes every connection, reclaiming their endpoints, and removes the
//! socket.
//!
//! The log is a convenience, never a condition of serving: a line that
//! cannot be written (standard output closed, a pipe whose reader went
//! away) is counted and dropped, never a panic, and the count is reported
//! on standard error when the daemon stops. (`println!` panics on such an
//! error; in the daemon's callback it ended every connection's thread
//! before it read a request.)

use std::error::Error;
use std::fmt;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use clap::{Args, ValueEnum};
use unet::daemon::{self, Event, ServeOptions};
use unet::transport::{LoopNet, Transport, UdpTransport};
use unet::{Addr, Engine, PortCounts};

use crate::signals;

/// The transports the daemon's engine runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum EngineTransport {
    /// In-process: frames between the endpoints of this engine only.
    Loop,
    /// Kernel UDP sockets: frames to and from other engines.
    Udp,
}

/// Options of `fastpath engine`.
#[derive(Args, Debug, Clone)]
pub struct EngineArgs {
    /// The Unix socket applications connect to [default:
    /// $XDG_RUNTIME_DIR/fastpath-engine.sock, or /tmp/fastpath-engine.sock].
    #[arg(long)]
    pub socket: Option<PathBuf>,
    /// The transport the engine's frames travel on.
    #[arg(long, value_enum, default_value = "loop")]
    pub transport: EngineTransport,
    /// The engine's address on the unet network, IP:PORT [default:
    /// 10.0.0.1:7000 for loop, 127.0.0.1:7000 for udp].
    #[arg(long, value_name = "IP:PORT")]
    pub bind: Option<Addr>,
    /// Engine threads polling the endpoints and the transport.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub threads: u16,
    /// The socket's permissions, in octal: who may connect. 600 lets only
    /// this user; 660 its group too; 666 every user, each then held to
    /// the daemon's budgets per user (16 connections) as well as per
    /// process.
    #[arg(long, default_value = "600", value_name = "OCTAL", value_parser = parse_mode)]
    pub mode: u32,
}

/// A socket mode in octal, permission bits only.
fn parse_mode(s: &str) -> Result<u32, String> {
    let m = u32::from_str_radix(s.strip_prefix("0o").unwrap_or(s), 8)
        .map_err(|_| format!("{s:?} is not an octal mode such as 600 or 660"))?;
    if m > 0o777 {
        return Err(format!(
            "{s:?}: a socket's mode has permission bits only, 777 at most"
        ));
    }
    if m & 0o600 != 0o600 {
        return Err(format!(
            "{s:?}: the daemon's own user must be able to connect to its socket, to tell a live one from a stale one (600 at least)"
        ));
    }
    Ok(m)
}

/// Runs `fastpath engine`.
pub fn run(args: &EngineArgs) -> ExitCode {
    match serve(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Not `eprintln!`, which panics if standard error is gone.
            let _ = writeln!(io::stderr(), "fastpath engine: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Log lines that could not be written to standard output.
static LOST_LINES: AtomicU64 = AtomicU64::new(0);

/// Writes one line of the log to standard output. A failure is counted
/// ([`LOST_LINES`]), never a panic: the daemon serves on whatever becomes
/// of its output.
fn say(line: fmt::Arguments<'_>) {
    let mut out = io::stdout().lock();
    // Standard output is line-buffered: the newline flushes it, and the
    // flush's error is the write's.
    if writeln!(out, "{line}").is_err() {
        LOST_LINES.fetch_add(1, Ordering::Relaxed);
    }
}

/// [`say`] with `format!`'s arguments.
macro_rules! say {
    ($($arg:tt)*) => {
        say(format_args!($($arg)*))
    };
}

fn serve(args: &EngineArgs) -> Result<(), Box<dyn Error>> {
    // Before any thread exists, so that every thread inherits the mask.
    let signals = signals::block_termination()?;
    let path = args
        .socket
        .clone()
        .unwrap_or_else(daemon::default_socket_path);
    let (transport, kind): (Box<dyn Transport>, &str) = match args.transport {
        EngineTransport::Loop => {
            let addr = args
                .bind
                .unwrap_or_else(|| "10.0.0.1:7000".parse().expect("a valid address"));
            (Box::new(LoopNet::new().attach(addr)?), "loop")
        }
        EngineTransport::Udp => {
            let addr = args
                .bind
                .unwrap_or_else(|| "127.0.0.1:7000".parse().expect("a valid address"));
            (Box::new(UdpTransport::bind(addr)?), "udp")
        }
    };
    let engine = Engine::new(transport);
    let opts = ServeOptions {
        mode: args.mode,
        on_event: Some(Arc::new(log)),
        ..ServeOptions::default()
    };
    let server = daemon::serve_with(engine.clone(), &path, opts)?;
    engine.start(usize::from(args.threads))?;
    say!(
        "fastpath engine: serving endpoints at {} (mode {:o}, transport {kind}, address {}, {} engine thread{}); \
         SIGINT or SIGTERM stops it",
        path.display(),
        args.mode,
        engine.local(),
        args.threads,
        if args.threads == 1 { "" } else { "s" },
    );
    let sig = signals::wait(&signals)?;
    say!("fastpath engine: {}, stopping", signals::name(sig));
    server.shutdown();
    engine.stop();
    let c = engine.counts();
    say!(
        "fastpath engine: {} frames in, {} out, {} unmatched, {} malformed, {} send errors, \
         {} dropped by the transport (no route {}, queue full {}, overruns {}, not unet {}), \
         {} lost to closed endpoints",
        c.frames_in,
        c.frames_out,
        c.unmatched,
        c.malformed,
        c.send_errors,
        c.transport_no_route + c.transport_queue_full + c.transport_overruns + c.transport_not_unet,
        c.transport_no_route,
        c.transport_queue_full,
        c.transport_overruns,
        c.transport_not_unet,
        c.closed
    );
    let lost = LOST_LINES.load(Ordering::Relaxed);
    if lost > 0 {
        let _ = writeln!(
            io::stderr(),
            "fastpath engine: {lost} log line{} could not be written to standard output",
            if lost == 1 { "" } else { "s" }
        );
    }
    Ok(())
}

/// Errors an endpoint's counters record (messages rejected or dropped).
fn errors(c: &PortCounts) -> u64 {
    c.tx_rejected
        + c.rx_no_buffer
        + c.rx_queue_full
        + c.rx_too_long
        + c.rx_bad_checksum
        + c.applet_traps
        + c.free_invalid
        + c.queue_corrupt
}

/// A client as the log names it: its process, and its user if known.
struct Client(Option<u32>, Option<u32>);

impl fmt::Display for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(pid) => write!(f, "process {pid}")?,
            None => f.write_str("an unknown process")?,
        }
        match self.1 {
            Some(uid) => write!(f, " (user {uid})"),
            None => Ok(()),
        }
    }
}

/// One line per event ([`say`]: a line that cannot be written is
/// counted, and the daemon goes on).
fn log(e: &Event) {
    match e {
        Event::Connected { conn, pid, uid } => {
            say!("connection {conn}: {}", Client(*pid, *uid));
        }
        Event::Refused { pid, uid, reason } => {
            say!("refused a connection from {}: {reason}", Client(*pid, *uid));
        }
        Event::Evicted { conn, pid, idle } => say!(
            "connection {conn} of {}: closed to make room for a new client, idle {:.1} s owning no endpoint",
            Client(*pid, None),
            idle.as_secs_f64()
        ),
        Event::EndpointCreated { conn, id } => say!("connection {conn}: endpoint {id} created"),
        Event::EndpointClosed {
            conn,
            id,
            counts,
            reclaimed,
        } => say!(
            "connection {conn}: endpoint {id} {}: {} frames sent, {} messages delivered, {} errors",
            if *reclaimed { "reclaimed" } else { "closed" },
            counts.tx_frames,
            counts.rx_delivered,
            errors(counts)
        ),
        Event::Disconnected { conn, reclaimed } => {
            say!("connection {conn}: closed ({reclaimed} endpoints reclaimed)")
        }
    }
}
