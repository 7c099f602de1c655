//! `fastpath filter`: check, compile and run dpf packet filters (the VCODE
//! paper's §4.2).
//!
//! - `check 'EXPR'` prints the parse, the lowered decision graph, and the
//!   atoms and residual the merger sees;
//! - `compile TABLE` compiles a table file (one filter a line: `OWNER[/PRIORITY]
//!   FILTER`, `#` comments; see `dpf::table_file`) and prints the merged
//!   structure's shape, the code size and the disassembly;
//! - `match TABLE CAPTURE` classifies every packet of a pcap or pcapng
//!   capture (read by `dpf::capture`, as leniently as libpcap reads it)
//!   with that table and prints the count per owner.
//!
//! `-` names standard input wherever a file is read (the table or the
//! capture, not both). `--json` prints one JSON object instead of text, for
//! scripts; a command that fails prints `--json`'s error object instead
//! (`{"error": {"command": "filter check", "message": ...}}`, see the
//! crate's doc), the message on standard error as without `--json`. A
//! capture that ends early, or a packet on a link type other than
//! Ethernet, stops `match` after the packets before it: their counts are
//! printed (marked incomplete; with `--json`, `"complete": false` and
//! where it stopped, the one object printed) and the command exits with
//! status 1, since the counts do not cover the whole capture.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::Subcommand;
use dpf::Table;
use dpf::capture::{CaptureReader, Format, LINKTYPE_ETHERNET, LinkType};
use dpf::merge::analyze;
use serde_json::json;

/// `println!` that ends quietly when stdout is closed (e.g. piped into `head`).
macro_rules! say {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

/// The `filter` subcommands.
#[derive(Subcommand)]
pub enum FilterCmd {
    /// Parse a filter and print its parse and decision structure.
    Check {
        /// The filter expression (pcap-filter syntax, see docs/dpf.md).
        expr: String,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Compile a table of filters and print its code.
    #[command(after_help = TABLE_HELP)]
    Compile {
        /// The table file: one `OWNER[/PRIORITY] FILTER` a line (`-`:
        /// standard input).
        #[arg(value_name = "TABLE")]
        file: PathBuf,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Classify every packet of a capture and print per-owner counts.
    #[command(after_help = MATCH_HELP)]
    Match {
        /// The table file, as for `compile` (`-`: standard input).
        #[arg(value_name = "TABLE")]
        file: PathBuf,
        /// A pcap or pcapng capture of Ethernet frames (`-`: standard
        /// input).
        capture: PathBuf,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// The table file's format, for `--help`.
const TABLE_HELP: &str = "\
Table file: one filter a line, `OWNER[/PRIORITY] FILTER`, for example
    1     tcp dst port 80 and dst host 10.0.0.1
    2/5   tcp dst port 443      # TLS, ranked above owner 1
OWNER is a whole number from 0 to 4294967295 (names are not accepted).
PRIORITY is a whole number from -2147483648 to 2147483647, default 0; of
the filters matching a packet the highest priority wins, then the earlier
line. `#` starts a comment, on its own line or after a filter.";

/// `match`'s inputs and exit status, for `--help`.
const MATCH_HELP: &str = "\
Table file: one filter a line, `OWNER[/PRIORITY] FILTER` (see `filter compile --help`):
OWNER a whole number from 0 to 4294967295, PRIORITY one from -2147483648 to
2147483647 (default 0, higher wins), `#` starts a comment.

The capture may be pcap (microsecond or nanosecond, either byte order) or
pcapng, and is read as leniently as libpcap reads it: a snaplen shorter than
the packets, captured lengths over the snaplen (cut to it), flag bits above
the link type. Its packets must be Ethernet frames (link type 1). `len`,
`greater` and `less` read a packet's length on the wire, as libpcap does, also
where the capture kept fewer bytes.

Exit status 1 if the capture stops early (truncated or damaged) or holds a
packet of another link type: the counts printed then cover the packets before
that point, and are marked incomplete.";

/// Runs a `filter` subcommand. Each returns the exit status once it has
/// printed its result (which may say it failed), or the error before it
/// printed anything, which goes to stderr and, with `--json`, to stdout as
/// the error object.
pub fn main(cmd: FilterCmd) -> ExitCode {
    let (command, json, result) = match cmd {
        FilterCmd::Check { expr, json } => ("filter check", json, check(&expr, json)),
        FilterCmd::Compile { file, json } => ("filter compile", json, compile(&file, json)),
        FilterCmd::Match {
            file,
            capture,
            json,
        } => ("filter match", json, run_match(&file, &capture, json)),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("fastpath filter: {e}");
            if json {
                crate::print_json_error(command, &e);
            }
            ExitCode::FAILURE
        }
    }
}

/// How a field's base reads in messages (as in `dpf::dump`).
fn base_name(base: dpf::ir::Base) -> &'static str {
    match base {
        dpf::ir::Base::Link => "ether",
        dpf::ir::Base::Transport => "tp",
        dpf::ir::Base::Value(_) => "value",
    }
}

fn check(expr: &str, json: bool) -> Result<ExitCode, String> {
    let parsed = dpf::parse(expr).map_err(|e| pointed(expr, &e))?;
    let program = dpf::compile(expr).map_err(|e| pointed(expr, &e))?;
    let a = analyze(&program);
    let atoms: Vec<String> = a
        .atoms
        .iter()
        .map(|atom| {
            let f = atom.key.field;
            format!(
                "{}[{}:{}] & {:#x} == {:#x}",
                base_name(f.base),
                f.offset,
                f.size as u32,
                atom.key.mask,
                atom.value
            )
        })
        .collect();
    if json {
        let atoms_json: Vec<_> = a
            .atoms
            .iter()
            .map(|atom| {
                let f = atom.key.field;
                json!({
                    "base": base_name(f.base),
                    "offset": f.offset,
                    "size": f.size as u32,
                    "mask": atom.key.mask,
                    "value": atom.value,
                })
            })
            .collect();
        let residual = match (&a.residual, a.never) {
            (_, true) | (None, _) => serde_json::Value::Null,
            (Some(r), false) => json!({
                "tests": r.nodes.len() - 2,
                "program": dpf::dump(r),
            }),
        };
        let out = json!({
            "filter": expr,
            "parse": parsed.to_string(),
            "tests": program.nodes.len() - 2,
            "program": dpf::dump(&program),
            "matches_nothing": a.never,
            "atoms": if a.never { Vec::new() } else { atoms_json },
            "residual": residual,
        });
        say!("{out:#}");
        return Ok(ExitCode::SUCCESS);
    }
    say!("parse:   {parsed}");
    say!("program ({} tests):", program.nodes.len() - 2);
    say!("{}", dpf::dump(&program));
    if a.never {
        say!("merging: matches no packet");
        return Ok(ExitCode::SUCCESS);
    }
    say!("merging: {} atoms shared with other filters:", atoms.len());
    for atom in &atoms {
        say!("  {atom}");
    }
    match &a.residual {
        None => say!("  and no residual: the filter is exactly its atoms"),
        Some(r) => say!(
            "  residual ({} tests):\n{}",
            r.nodes.len() - 2,
            dpf::dump(r)
        ),
    }
    Ok(ExitCode::SUCCESS)
}

/// An error about `expr` with a caret under its column, if it has one.
fn pointed(expr: &str, e: &dpf::Error) -> String {
    match e.column() {
        Some(c) => format!("{e}\n{}", caret(expr, c)),
        None => e.to_string(),
    }
}

/// Characters of a filter shown on either side of an error's column; a
/// longer filter is shown as the window around it.
const CARET_WINDOW: usize = 60;

/// `text` on one line and a caret under its 1-based character `column` on
/// the next, both indented two spaces. The caret's padding repeats the
/// tabs before the column, so that it lines up however a terminal sets
/// them; a text longer than the window is cut to `CARET_WINDOW`
/// characters either side of the column, each cut marked `...`.
fn caret(text: &str, column: usize) -> String {
    let chars: Vec<char> = text.chars().collect();
    let at = column.saturating_sub(1).min(chars.len());
    let from = at.saturating_sub(CARET_WINDOW);
    let to = (at + CARET_WINDOW).min(chars.len());
    let (head, tail) = (
        if from > 0 { "..." } else { "" },
        if to < chars.len() { "..." } else { "" },
    );
    let shown: String = chars[from..to].iter().collect();
    let pad: String = std::iter::once(head)
        .flat_map(|h| h.chars().map(|_| ' '))
        .chain(
            chars[from..at]
                .iter()
                .map(|&c| if c == '\t' { '\t' } else { ' ' }),
        )
        .collect();
    format!("  {head}{shown}{tail}\n  {pad}^")
}

/// How messages name a path given on the command line (`-`: standard
/// input).
fn shown(path: &Path) -> String {
    if is_stdin(path) {
        "standard input".into()
    } else {
        path.display().to_string()
    }
}

fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Opens a file to read, or standard input for `-`; a directory is refused
/// with a message that says so.
fn open(path: &Path, expected: &str) -> Result<Box<dyn Read>, String> {
    if is_stdin(path) {
        return Ok(Box::new(std::io::stdin().lock()));
    }
    let name = path.display();
    let f = std::fs::File::open(path).map_err(|e| format!("{name}: {e}"))?;
    let meta = f.metadata().map_err(|e| format!("{name}: {e}"))?;
    if meta.is_dir() {
        return Err(format!("{name}: is a directory, expected {expected}"));
    }
    Ok(Box::new(f))
}

/// Reads a table file (or standard input) into a table.
fn load(file: &Path) -> Result<Table, String> {
    let name = shown(file);
    let mut bytes = Vec::new();
    open(file, "a table file")?
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{name}: {e}"))?;
    let lines = dpf::table_file::parse_bytes(&bytes)
        .map_err(|e| format!("{name}:{}:{}: {}", e.line, e.column, e.message))?;
    let mut table = Table::new();
    table
        .install_many(
            lines
                .iter()
                .map(|l| (l.filter.as_str(), l.owner, l.priority)),
        )
        .map_err(|e| match e {
            // Name the line, and point at the column, of the filter that
            // did not compile.
            dpf::Error::InBatch { index, error } => {
                let l = &lines[index];
                match error.column() {
                    // The column in the line, not in its filter.
                    Some(c) => {
                        let text = error.to_string();
                        let message = text.strip_prefix(&format!("column {c}: ")).unwrap_or(&text);
                        format!(
                            "{name}:{}:{}: {message}\n{}",
                            l.line,
                            l.column + c - 1,
                            caret(&l.filter, c)
                        )
                    }
                    None => format!("{name}:{}: {error}", l.line),
                }
            }
            e => format!("{name}: {e}"),
        })?;
    Ok(table)
}

fn compile(file: &Path, json: bool) -> Result<ExitCode, String> {
    let t = Instant::now();
    let table = load(file)?;
    let elapsed = t.elapsed();
    let c = table.classifier();
    let s = c.merged().stats();
    let code = table.code_listing();
    if json {
        let out = json!({
            "filters": table.len(),
            "compile_ms": elapsed.as_secs_f64() * 1e3,
            "merged": {
                "nodes": s.nodes,
                "dispatch": {
                    "linear": s.linear,
                    "binary_search": s.binary,
                    "jump_table": s.table,
                    "hash": s.hash,
                },
                "filters_with_residual": s.residuals,
            },
            "code_bytes": code.as_ref().map(|(len, _)| *len),
            "disassembly": code.as_ref().map(|(_, l)| l.as_str()),
        });
        say!("{out:#}");
        return Ok(ExitCode::SUCCESS);
    }
    say!(
        "{} compiled in {:.3} ms",
        plural(table.len(), "filter"),
        elapsed.as_secs_f64() * 1e3
    );
    say!(
        "merged into a trie of {}; dispatches: {} linear, {} binary search, {} jump table, {} hash; {} with a residual",
        plural(s.nodes, "node"),
        s.linear,
        s.binary,
        s.table,
        s.hash,
        plural(s.residuals, "filter"),
    );
    match code {
        None => say!("no code: the table is empty"),
        Some((len, listing)) => {
            say!("code: {len} bytes");
            say!("{listing}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `1 node`, `2 nodes`.
fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// What `match` counted.
#[derive(Default)]
struct Counts {
    total: u64,
    unmatched: u64,
    cut: u64,
    owners: std::collections::BTreeMap<u32, u64>,
}

fn run_match(file: &Path, capture: &Path, json: bool) -> Result<ExitCode, String> {
    if is_stdin(file) && is_stdin(capture) {
        return Err("the table and the capture cannot both be standard input (`-`)".into());
    }
    let table = load(file)?;
    let name = shown(capture);
    let input = std::io::BufReader::new(open(capture, "a pcap or pcapng capture")?);
    let mut reader = CaptureReader::new(input).map_err(|e| format!("{name}: {e}"))?;
    let format = reader.format();
    if let Format::Pcap { link_type, .. } = format
        && link_type != LINKTYPE_ETHERNET
    {
        return Err(format!(
            "{name}: link type {}: dpf classifies Ethernet frames only (link type 1){}",
            LinkType(link_type),
            link_hint(link_type)
        ));
    }
    let mut counts = Counts::default();
    let mut classifier = table.reader();
    // The error that stopped reading before the end, if one did.
    let stopped = loop {
        let packet = match reader.next_packet() {
            Ok(Some(p)) => p,
            Ok(None) => break None,
            Err(e) => break Some(e.to_string()),
        };
        if packet.link_type != LINKTYPE_ETHERNET {
            break Some(format!(
                "byte {}: packet {} is on interface {}, of link type {}: dpf classifies Ethernet frames only (link type 1){}",
                packet.offset,
                counts.total + 1,
                packet.interface,
                LinkType(packet.link_type),
                link_hint(packet.link_type)
            ));
        }
        counts.total += 1;
        counts.cut += u64::from(packet.cut);
        // `len` is the packet's length on the wire, as libpcap reads a
        // record cut to its snaplen.
        match classifier.classify_captured(packet.data, packet.orig_len) {
            Some(owner) => *counts.owners.entry(owner).or_default() += 1,
            None => counts.unmatched += 1,
        }
    };
    let format_name = match format {
        Format::Pcap {
            nanoseconds: true, ..
        } => "pcap (nanosecond)",
        Format::Pcap { .. } => "pcap",
        Format::PcapNg => "pcapng",
    };
    if json {
        let owners: serde_json::Map<String, serde_json::Value> = counts
            .owners
            .iter()
            .map(|(o, n)| (o.to_string(), json!(n)))
            .collect();
        let out = json!({
            "capture": name,
            "format": format_name,
            "packets": counts.total,
            "owners": owners,
            "no_match": counts.unmatched,
            "cut_to_snaplen": counts.cut,
            "complete": stopped.is_none(),
            "stopped": stopped.as_ref().map(|e| format!("{name}: {e}")),
        });
        say!("{out:#}");
    } else {
        let incomplete = if stopped.is_some() {
            " (incomplete: the capture stopped early, see the error)"
        } else {
            ""
        };
        say!("{}{incomplete}", plural(counts.total as usize, "packet"));
        for (owner, n) in &counts.owners {
            say!("owner {owner}: {n}");
        }
        say!("no match: {}", counts.unmatched);
        if counts.cut > 0 {
            say!(
                "cut to the snaplen, as libpcap does: {}",
                plural(counts.cut as usize, "packet")
            );
        }
    }
    match stopped {
        None => Ok(ExitCode::SUCCESS),
        // The counts are printed (with `--json`, the report that says where
        // the capture stopped): not an error before any output, so no
        // error object on stdout.
        Some(e) => {
            eprintln!(
                "fastpath filter: {name}: {e}; the counts printed cover the {} packets before it",
                counts.total
            );
            Ok(ExitCode::FAILURE)
        }
    }
}

/// Advice for a capture of a link type dpf does not classify.
fn link_hint(link_type: u16) -> &'static str {
    match link_type {
        113 | 276 => {
            "; a capture on Linux's `any` device has cooked headers: capture on one Ethernet interface (`tcpdump -i eth0`)"
        }
        _ => "",
    }
}
