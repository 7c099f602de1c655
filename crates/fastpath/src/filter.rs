//! `fastpath filter`: check, compile and run dpf packet filters (the VCODE
//! paper's §4.2).
//!
//! - `check 'EXPR'` prints the parse, the lowered decision graph, and the
//!   atoms and residual the merger sees;
//! - `compile FILE` compiles a table (one filter a line: `OWNER[/PRIORITY]
//!   EXPRESSION`, `#` comments) and prints the merged structure's shape, the
//!   code size and the disassembly;
//! - `match FILE PCAP` classifies every packet of a pcap file with that
//!   table and prints the count per owner.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::Subcommand;
use dpf::Table;
use dpf::merge::analyze;

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
    },
    /// Compile a table of filters and print its code.
    Compile {
        /// One filter a line: `OWNER[/PRIORITY] EXPRESSION`.
        file: PathBuf,
    },
    /// Classify every packet of a pcap file and print per-owner counts.
    Match {
        /// The table, as for `compile`.
        file: PathBuf,
        /// A pcap capture of Ethernet frames.
        pcap: PathBuf,
    },
}

/// Runs a `filter` subcommand.
pub fn main(cmd: FilterCmd) -> ExitCode {
    let result = match cmd {
        FilterCmd::Check { expr } => check(&expr),
        FilterCmd::Compile { file } => compile(&file),
        FilterCmd::Match { file, pcap } => run_match(&file, &pcap),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fastpath filter: {e}");
            ExitCode::FAILURE
        }
    }
}

fn check(expr: &str) -> Result<(), String> {
    let parsed = dpf::parse(expr).map_err(|e| pointed(expr, &e))?;
    say!("parse:   {parsed}");
    let program = dpf::compile(expr).map_err(|e| pointed(expr, &e))?;
    say!("program ({} tests):", program.nodes.len() - 2);
    say!("{}", dpf::dump(&program));
    let a = analyze(&program);
    if a.never {
        say!("merging: matches no packet");
        return Ok(());
    }
    say!(
        "merging: {} atoms shared with other filters:",
        a.atoms.len()
    );
    for atom in &a.atoms {
        let f = atom.key.field;
        say!(
            "  {:?}[{}:{}] & {:#x} == {:#x}",
            f.base,
            f.offset,
            f.size as u32,
            atom.key.mask,
            atom.value
        );
    }
    match &a.residual {
        None => say!("  and no residual: the filter is exactly its atoms"),
        Some(r) => say!(
            "  residual ({} tests):\n{}",
            r.nodes.len() - 2,
            dpf::dump(r)
        ),
    }
    Ok(())
}

/// An error about `expr` with a caret under its column, if it has one.
fn pointed(expr: &str, e: &dpf::Error) -> String {
    match e.column() {
        Some(c) => format!("{e}\n  {expr}\n  {}^", " ".repeat(c.saturating_sub(1))),
        None => e.to_string(),
    }
}

/// Reads a table file into a table.
fn load(file: &Path) -> Result<Table, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    // (line number, expression, owner, priority)
    let mut filters = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = |msg: String| format!("{}:{}: {msg}", file.display(), i + 1);
        let (head, expr) = line
            .split_once(char::is_whitespace)
            .ok_or_else(|| at("expected `OWNER[/PRIORITY] EXPRESSION`".into()))?;
        let (owner, prio) = head.split_once('/').unwrap_or((head, "0"));
        let owner: u32 = owner
            .parse()
            .map_err(|_| at(format!("owner {owner:?} is not a number")))?;
        let prio: i32 = prio
            .parse()
            .map_err(|_| at(format!("priority {prio:?} is not a number")))?;
        filters.push((i + 1, expr.trim(), owner, prio));
    }
    let mut table = Table::new();
    table
        .install_many(filters.iter().map(|&(_, e, o, p)| (e, o, p)))
        .map_err(|e| match e {
            // Name the line, and point at the column, of the filter that
            // did not compile.
            dpf::Error::InBatch { index, error } => {
                let (line, expr, ..) = filters[index];
                format!("{}:{line}: {}", file.display(), pointed(expr, &error))
            }
            e => format!("{}: {e}", file.display()),
        })?;
    Ok(table)
}

fn compile(file: &Path) -> Result<(), String> {
    let t = Instant::now();
    let table = load(file)?;
    let elapsed = t.elapsed();
    let c = table.classifier();
    say!(
        "{} filters compiled in {:.3} ms; merged: {:?}",
        table.len(),
        elapsed.as_secs_f64() * 1e3,
        c.merged().stats()
    );
    match table.code_listing() {
        None => say!("no code: the table is empty"),
        Some((len, listing)) => {
            say!("code: {len} bytes");
            say!("{listing}");
        }
    }
    Ok(())
}

fn run_match(file: &Path, pcap: &Path) -> Result<(), String> {
    let table = load(file)?;
    let f = std::fs::File::open(pcap).map_err(|e| format!("{}: {e}", pcap.display()))?;
    let mut reader = pcap_file::pcap::PcapReader::new(std::io::BufReader::new(f))
        .map_err(|e| format!("{}: {e}", pcap.display()))?;
    let link = reader.header().datalink;
    if link != pcap_file::DataLink::ETHERNET {
        return Err(format!(
            "{}: link type {link:?}; dpf classifies Ethernet frames",
            pcap.display()
        ));
    }
    let mut counts = std::collections::BTreeMap::<u32, u64>::new();
    let (mut total, mut unmatched) = (0u64, 0u64);
    let mut classifier = table.reader();
    while let Some(packet) = reader.next_packet() {
        let packet =
            packet.map_err(|e| format!("{}: packet {}: {e}", pcap.display(), total + 1))?;
        total += 1;
        match classifier.classify(&packet.data) {
            Some(owner) => *counts.entry(owner).or_default() += 1,
            None => unmatched += 1,
        }
    }
    say!("{total} packets");
    for (owner, n) in counts {
        say!("owner {owner}: {n}");
    }
    say!("no match: {unmatched}");
    Ok(())
}
