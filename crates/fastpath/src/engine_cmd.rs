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
//! before it read a request.) Lines are queued for a thread of the log's
//! own, so an output read slowly or not at all holds up no thread that
//! serves: written from the accepting thread, a refusal's line into a full
//! pipe stopped the daemon taking connections. A line that finds the
//! queue (4,096 lines) full is counted lost too.

use std::error::Error;
use std::fmt;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::time::Duration;

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
    /// Engine threads polling the endpoints and the transport, 1 to 64.
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

/// Log lines that could not be written to standard output: failed, or
/// dropped with the queue full ([`Log`]).
static LOST_LINES: AtomicU64 = AtomicU64::new(0);

/// Lines queued and not yet written (or failed).
static PENDING_LINES: AtomicU64 = AtomicU64::new(0);

/// Lines the log holds for a standard output slower than the daemon.
const LOG_QUEUE: usize = 4096;

/// How long the daemon, stopping, waits for its queued lines to be
/// written before it counts the rest lost.
const LOG_DRAIN: Duration = Duration::from_secs(2);

/// The log: the daemon's threads queue lines, a thread of its own writes
/// them. A thread that logs never waits for standard output: written
/// there directly, a log read slowly or not at all (a pipe whose reader
/// stopped reading) held the thread that logged, and a refusal's line held
/// the accepting thread and with it every client. A line that finds the
/// queue full is counted lost.
#[derive(Clone)]
struct Log {
    lines: SyncSender<String>,
}

impl Log {
    /// The log and its writer's end: a message when every line queued is
    /// written.
    fn start() -> io::Result<(Log, Receiver<()>)> {
        let (lines, queue) = sync_channel::<String>(LOG_QUEUE);
        let (done, drained) = sync_channel(1);
        std::thread::Builder::new()
            .name("fastpath-engine-log".into())
            .spawn(move || {
                for line in queue {
                    write_line(&line);
                    PENDING_LINES.fetch_sub(1, Ordering::Relaxed);
                }
                let _ = done.send(());
            })?;
        Ok((Log { lines }, drained))
    }

    fn say(&self, line: fmt::Arguments<'_>) {
        PENDING_LINES.fetch_add(1, Ordering::Relaxed);
        if self.lines.try_send(line.to_string()).is_err() {
            PENDING_LINES.fetch_sub(1, Ordering::Relaxed);
            LOST_LINES.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Closes the log and waits up to [`LOG_DRAIN`] for its lines to be
    /// written: the lines lost, those still queued then included.
    fn finish(self, drained: &Receiver<()>) -> u64 {
        drop(self);
        let _ = drained.recv_timeout(LOG_DRAIN);
        LOST_LINES.load(Ordering::Relaxed) + PENDING_LINES.load(Ordering::Relaxed)
    }
}

/// Writes one line of the log to standard output. A failure is counted
/// ([`LOST_LINES`]), never a panic: the daemon serves on whatever becomes
/// of its output.
fn write_line(line: &str) {
    let mut out = io::stdout().lock();
    // Standard output is line-buffered: the newline flushes it, and the
    // flush's error is the write's.
    if writeln!(out, "{line}").is_err() {
        LOST_LINES.fetch_add(1, Ordering::Relaxed);
    }
}

/// [`Log::say`] with `format!`'s arguments.
macro_rules! say {
    ($log:expr, $($arg:tt)*) => {
        $log.say(format_args!($($arg)*))
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
    let (out, drained) = Log::start()?;
    let hook = out.clone();
    let opts = ServeOptions {
        mode: args.mode,
        on_event: Some(Arc::new(move |e: &Event| log(&hook, e))),
        ..ServeOptions::default()
    };
    let server = daemon::serve_with(engine.clone(), &path, opts)?;
    engine.start(usize::from(args.threads))?;
    say!(
        out,
        "fastpath engine: serving endpoints at {} (mode {:o}, transport {kind}, address {}, {} engine thread{}); \
         SIGINT or SIGTERM stops it",
        path.display(),
        args.mode,
        engine.local(),
        args.threads,
        if args.threads == 1 { "" } else { "s" },
    );
    let sig = signals::wait(&signals)?;
    say!(out, "fastpath engine: {}, stopping", signals::name(sig));
    server.shutdown();
    engine.stop();
    let c = engine.counts();
    say!(
        out,
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
    let lost = out.finish(&drained);
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

/// One line per event ([`Log`]: a line that cannot be written is
/// counted, and the daemon goes on).
fn log(out: &Log, e: &Event) {
    match e {
        Event::Connected { conn, pid, uid } => {
            say!(out, "connection {conn}: {}", Client(*pid, *uid));
        }
        Event::Refused { pid, uid, reason } => {
            say!(
                out,
                "refused a connection from {}: {reason}",
                Client(*pid, *uid)
            );
        }
        Event::Evicted { conn, pid, idle } => say!(
            out,
            "connection {conn} of {}: closed to make room for a new client, idle {:.1} s owning no endpoint",
            Client(*pid, None),
            idle.as_secs_f64()
        ),
        Event::EndpointCreated { conn, id } => {
            say!(out, "connection {conn}: endpoint {id} created")
        }
        Event::EndpointClosed {
            conn,
            id,
            counts,
            reclaimed,
        } => say!(
            out,
            "connection {conn}: endpoint {id} {}: {} frames sent, {} messages delivered, {} errors",
            if *reclaimed { "reclaimed" } else { "closed" },
            counts.tx_frames,
            counts.rx_delivered,
            errors(counts)
        ),
        Event::Disconnected { conn, reclaimed } => {
            say!(
                out,
                "connection {conn}: closed ({reclaimed} endpoints reclaimed)"
            )
        }
    }
}
