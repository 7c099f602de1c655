//! The U-Net/SLE paper's Figure 7 (transmit/receive operation overhead) as
//! exact host instruction counts, by `valgrind --tool=callgrind`.
//!
//! ```text
//! cargo build --release -p fastpath-bench --bin unet-count
//! target/release/unet-count                  # every case under callgrind, then the table
//! target/release/unet-count all 16384        # the same, N messages per case
//! target/release/unet-count all 16384 --jit  # the JIT's column alone (half the runs)
//! target/release/unet-count list             # the cases and their toggle functions
//! # one case by hand (N defaults to 16384):
//! valgrind --tool=callgrind --toggle-collect=unet_count_path target/release/unet-count path-40 16384
//! valgrind --tool=callgrind --toggle-collect=unet_count_path target/release/unet-count path-1000 16384
//! valgrind --tool=callgrind --toggle-collect=unet_count_path target/release/unet-count path-57 16384
//! valgrind --tool=callgrind --toggle-collect=unet_count_path_copying target/release/unet-count path-40-copying 16384
//! valgrind --tool=callgrind --toggle-collect=unet_count_path target/release/unet-count path-40-framed 16384
//! valgrind --tool=callgrind --toggle-collect=unet_count_path target/release/unet-count path-1000-framed 16384
//! valgrind --tool=callgrind --toggle-collect=unet_count_path target/release/unet-count standard-40 16384
//! valgrind --tool=callgrind --toggle-collect=unet_count_path target/release/unet-count standard-1000 16384
//! valgrind --tool=callgrind --toggle-collect=unet_count_path target/release/unet-count standard-40-framed 16384
//! valgrind --tool=callgrind --toggle-collect=unet_count_path target/release/unet-count standard-1000-framed 16384
//! valgrind --tool=callgrind --toggle-collect=unet_count_path target/release/unet-count path-4096 16384
//! valgrind --tool=callgrind --toggle-collect=unet_count_path target/release/unet-count standard-4096 16384
//! valgrind --tool=callgrind --toggle-collect=unet_count_send target/release/unet-count deliver 16384
//! valgrind --tool=callgrind --toggle-collect=unet_count_send target/release/unet-count dorx 16384
//! valgrind --tool=callgrind --toggle-collect=unet_count_send target/release/unet-count dorx-lent 16384
//! valgrind --tool=callgrind --toggle-collect=unet_count_send target/release/unet-count dorx-null 16384
//! valgrind --tool=callgrind --toggle-collect=unet_count_send target/release/unet-count dorx-lent-null 16384
//! valgrind --tool=callgrind --toggle-collect=unet_count_send target/release/unet-count null 16384
//! valgrind --tool=callgrind --toggle-collect=unet_count_send target/release/unet-count getbuf 16384
//! valgrind --tool=callgrind --toggle-collect=unet_count_send target/release/unet-count push 16384
//! valgrind --tool=callgrind --toggle-collect=unet_count_ring target/release/unet-count ring-40 16384
//! valgrind --tool=callgrind --toggle-collect=unet_count_ring target/release/unet-count ring-57 16384
//! valgrind --tool=callgrind --toggle-collect=unet_count_ring target/release/unet-count ring-1000 16384
//! # a case with its applets on jive's interpreter instead of the JIT:
//! valgrind --tool=callgrind --toggle-collect=unet_count_path target/release/unet-count standard-40 16384 --interp
//! callgrind_annotate --inclusive=yes callgrind.out.<pid>    # where the instructions go
//! # the receiving applet's machine code on stderr, at the addresses it ran at, to
//! # match with the per-address counts of --dump-instr=yes (the `???` object):
//! UNET_COUNT_LISTING=1 valgrind --tool=callgrind --dump-instr=yes --toggle-collect=unet_count_path target/release/unet-count standard-40 16384
//! ```
//!
//! Each case is one process: two endpoints of one engine on the `loop`
//! transport, in one thread, sending 40-byte (or 1000-byte) messages from
//! `a` to `b`. 20,000 messages warm the process up outside the toggled
//! function (dpf reader, outboxes, scratch buffers, the sender's in-flight
//! list), then N messages go through it. Callgrind counts exactly the
//! instructions executed between entry to and return from the toggled
//! function, callees included, and nothing else; every row of the table
//! is a difference of two such totals divided by N (per message) or by 8N
//! (per native call), so what two cases share cancels out.
//!
//! How each step is isolated:
//!
//! - **The whole path** (`path-40`, `path-1000`, toggle `unet_count_path`):
//!   `a.send` (which runs the engine: take the descriptor, make the frame,
//!   classify it with dpf, deliver it) then `b.recv_ref` (the message read
//!   in place in its receive queue slot) and a copy of the message out, no
//!   applet: between two endpoints of one engine the message goes without
//!   a frame (docs/unet.md). `path-40-copying` (toggle
//!   `unet_count_path_copying`) is `path-40` with the copying `b.recv`,
//!   which copies the 64-byte receive descriptor out first. `path-*-framed` is the
//!   same path with [`FRAMING_FILTER`](fastpath_bench::unet::FRAMING_FILTER)
//!   installed, which makes the engine build and classify a frame for every
//!   message, as it does for every message to an applet's endpoint.
//!   `standard-*` is the path with the standard U-Net applet on both
//!   endpoints, also without a frame (`doRx` gets the message straight from
//!   the sender's buffer area when the sender has no applet; the frames
//!   `doTx` pushes are delivered with the channel's kept verdict, not
//!   classified); its difference from `path-*` is what `doTx` and `doRx`
//!   (and their natives) add per message, what a user pays.
//!   `standard-*-framed` is it with the framing filter, as every applet
//!   message went before; its difference from `path-*-framed` is the
//!   applet's cost through a frame, and `standard-*-framed` −
//!   `standard-*` what the frameless delivery saves.
//! - **The peer** (`ring-40`, `ring-57`, `ring-1000`, toggle
//!   `unet_count_ring`): the bare SPSC ring that `fastpath demo` times
//!   U-Net against (`unet::peer`, the endpoints' queue code and nothing
//!   else): one end sends the
//!   message (in its slot up to 56 bytes, else in the ring's area), the
//!   other copies it out, on one thread. `path-*` − `ring-*` is the
//!   engine's own work a message, and the path's copy out into a `Vec`
//!   where the ring copies into a slice.
//! - **Invoking doRx** (`dorx` − `deliver`, toggle `unet_count_send`): the
//!   toggle covers the send alone, which includes the receiving endpoint's
//!   handling of the frame (the engine delivers inside the send), while the
//!   receiving application drains its queue between sends, outside the
//!   count. Every case here is framed, so that they differ only in the
//!   receiver. In `deliver`, `b` has no applet and the engine delivers the
//!   message inline the standard U-Net way; in `dorx`, `b` runs the
//!   `Breakdown` applet (`applets/unet/Breakdown.java`) in mode 0, whose
//!   `doRx` returns at once. The difference is what handing a message to an
//!   applet costs over the standard U-Net code (the paper's framing):
//!   filling `RxBuf`, calling `doRx`, its dispatch and return, minus the
//!   engine's own inline descriptor push that the applet replaces.
//!   `dorx-lent` is the same with `BreakdownLent` (its `doRx(byte[] msg,
//!   int, int)` gets the message lent, not copied into `RxBuf`).
//! - **Invoking a `doRx` that returns at once** (issue 28's wording:
//!   `dorx-null` and `dorx-lent-null`, each − `deliver`): `Breakdown`'s
//!   mode 0 reads its static `mode` and switches on it before it returns
//!   (7 instructions of its own: the static's load, the table's bound, its
//!   jump). `NullRx` and `NullRxLent` (`applets/unet/NullRx*.java`) have a
//!   `doRx` of one `return 0`, copied and lent, so that what they count
//!   is the invocation and nothing of the probe's own.
//! - **A null native, getFreeBuffer, pushing a receive descriptor** (`null`,
//!   `getbuf`, `push`, each − `dorx`, / 8N): `Breakdown`'s modes 1 to 3,
//!   whose `doRx` makes 8 calls of `getFreeBufferLength()`,
//!   `getFreeBuffer()` or `dmaRxdPayload(RxBuf, chan, 0)`, written out, in
//!   a `tableswitch` case ending in `return 0` like mode 0's: the bytecode
//!   differs from mode 0's by the 8 calls alone (each with its argument
//!   pushes and the pop of an unused result). Outside the count, the
//!   application gives the 8 buffers back to the free queue after each
//!   `getbuf` message (in FIFO order, so the queue always holds 256
//!   distinct buffers and never runs dry) and drains the 8 descriptors of
//!   each `push` message (the receive queue holds 256).
//!
//! **The interpreter beside the JIT.** `all` runs every case with the
//! applets on jive's JIT (as the engine installs them), then every case in
//! which an applet runs again with `--interp`, which switches both
//! endpoints' applets to the interpreter after installing them; the table
//! has a column for each, and the interpreter's is filled on the rows an
//! applet runs in (the others count no applet code, so both engines give
//! them the same figure). `--jit` leaves the interpreter's runs out.
//!
//! Each counted process checks, at the end, that its receiver did what the
//! case assumes (no applet trap or drop, the expected number of
//! descriptors, no dry free queue; for the ring, every message's length and
//! bytes) and fails otherwise.

use std::process::ExitCode;

use fastpath_bench::unet::{
    CASES, INTERP_FLAG, MESSAGES, WARM_UP, callgrind, case, interp_totals, report, run_case, table,
};

/// `all`'s flag that leaves out the interpreter's runs.
const JIT_FLAG: &str = "--jit";

fn usage() -> String {
    let names: Vec<&str> = CASES.iter().map(|c| c.name).collect();
    format!(
        "usage: unet-count [all [N] [{JIT_FLAG}] | list | CASE [N] [{INTERP_FLAG}]]\n  CASE: {}\n  N: counted messages (default {MESSAGES})\n  {INTERP_FLAG}: the case's applets on jive's interpreter instead of the JIT\n  {JIT_FLAG}: the JIT's column alone, without the interpreter's runs",
        names.join(", ")
    )
}

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut flag = |f: &str| match args.iter().position(|a| a == f) {
        Some(i) => {
            args.remove(i);
            true
        }
        None => false,
    };
    let interp = flag(INTERP_FLAG);
    let jit_only = flag(JIT_FLAG);
    let what = args.first().map_or("all", String::as_str);
    if (interp && what == "all") || (jit_only && what != "all") {
        eprintln!(
            "unet-count: {} goes with {}\n{}",
            if interp { INTERP_FLAG } else { JIT_FLAG },
            if interp { "one case" } else { "all" },
            usage()
        );
        return ExitCode::from(2);
    }
    let engine = if interp {
        jive::Engine::Interpreter
    } else {
        jive::Engine::Jit
    };
    let n = match args.get(1).map(|s| s.parse::<usize>()) {
        None => MESSAGES,
        Some(Ok(n)) if n > 0 => n,
        _ => {
            eprintln!("unet-count: bad message count\n{}", usage());
            return ExitCode::from(2);
        }
    };
    match what {
        "all" => all(n, !jit_only),
        "list" => {
            for c in CASES {
                println!(
                    "{:<16} --toggle-collect={}  ({} B, receiver: {}, {})",
                    c.name,
                    c.toggle,
                    c.size,
                    c.receiver,
                    if c.framed {
                        "framed"
                    } else {
                        "frameless where it can be"
                    }
                );
            }
            ExitCode::SUCCESS
        }
        "-h" | "--help" | "help" => {
            println!("{}", usage());
            ExitCode::SUCCESS
        }
        name => match case(name) {
            Some(c) => match run_case(c, n, engine) {
                Ok(r) => {
                    let ran = match r.engine {
                        Some(e) => format!("the receiver's applet on {e:?}"),
                        None => "no applet on the receiver".into(),
                    };
                    println!(
                        "{} ({ran}): {} counted messages after {WARM_UP} warm-up, {} descriptors received; the receiver delivered {}, trapped {}, dropped {}",
                        c.name,
                        r.counted,
                        r.received,
                        r.counts.rx_delivered,
                        r.counts.applet_traps,
                        r.counts.applet_drops
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("unet-count: {e}");
                    ExitCode::FAILURE
                }
            },
            None => {
                eprintln!("unet-count: unknown case {name:?}\n{}", usage());
                ExitCode::from(2)
            }
        },
    }
}

/// Every case under callgrind, then the table: the JIT's column, and the
/// interpreter's beside it when `with_interp` (each case with an applet
/// counted again on the interpreter).
fn all(n: usize, with_interp: bool) -> ExitCode {
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("unet-count: cannot find this program: {e}");
            return ExitCode::FAILURE;
        }
    };
    let Some(totals) = count(&exe, CASES.iter(), n, jive::Engine::Jit) else {
        return ExitCode::FAILURE;
    };
    let interp = if with_interp {
        let with_applet = CASES.iter().filter(|c| c.receiver.runs_applet());
        match count(&exe, with_applet, n, jive::Engine::Interpreter) {
            Some(ran) => Some(interp_totals(&totals, &ran)),
            None => return ExitCode::FAILURE,
        }
    } else {
        None
    };
    let Some(rows) = report(&totals, n) else {
        eprintln!("unet-count: a case is missing");
        return ExitCode::FAILURE;
    };
    // The interpreter's totals name the same cases as the JIT's.
    let interp_rows = interp.as_ref().and_then(|t| report(t, n));
    println!(
        "Figure 7 breakdown: host instructions (callgrind), N = {n} messages per case after {WARM_UP} uncounted\n"
    );
    print!("{}", table(&rows, interp_rows.as_deref()));
    if interp_rows.is_some() {
        println!(
            "\nThe interpreter's column is empty where no applet runs: those rows count no applet code."
        );
    }
    println!("\nTotals (instructions in the toggled function over N messages):");
    for (i, (name, ir)) in totals.iter().enumerate() {
        let ran = case(name).is_some_and(|c| c.receiver.runs_applet());
        match interp.as_ref().map(|t| t[i].1) {
            Some(other) if ran => {
                println!("  {name:<24} {ir:>12}  interpreter {other:>12}")
            }
            _ => println!("  {name:<24} {ir:>12}"),
        }
    }
    ExitCode::SUCCESS
}

/// Each of `cases` under callgrind with its applets on `engine`; the
/// totals, or `None` (said on stderr) if one could not be counted.
fn count<'a>(
    exe: &std::path::Path,
    cases: impl Iterator<Item = &'a fastpath_bench::unet::Case>,
    n: usize,
    engine: jive::Engine,
) -> Option<Vec<(&'a str, u64)>> {
    let mut totals = Vec::new();
    for c in cases {
        eprint!("callgrind {:<24} ", format!("{} ({engine:?})", c.name));
        match callgrind(exe, c, n, engine) {
            Ok(ir) => {
                eprintln!("{ir} instructions in {}", c.toggle);
                totals.push((c.name, ir));
            }
            Err(skip) => {
                eprintln!();
                eprintln!("unet-count: {}", skip.0);
                return None;
            }
        }
    }
    Some(totals)
}
