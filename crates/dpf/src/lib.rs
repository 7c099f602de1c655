//! # dpf: dynamic packet filters
//!
//! DPF after Engler, *VCODE*, PLDI 1996, §4.2: many packet filters, written
//! in a subset of pcap-filter(7) syntax, merged into one decision structure
//! and compiled through `vcode` into one native classifier.
//!
//! | phase | module |
//! |---|---|
//! | the filter language: a pcap-filter(7) subset, parsed | [`syntax`] |
//! | lowering a filter to a program with libpcap's semantics | [`lower`] |
//! | filter program representation and its reference semantics | [`ir`] |
//! | merging a table into one decision structure; its reference evaluator | [`merge`] |
//! | native code for the merged structure, through vcode | [`codegen`] |
//! | the merged table lowered to an XDP program; attached and kept in step | [`ebpf`] |
//! | the filter table: install, remove, publish | [`table`] |
//! | libpcap loaded at run time: the differential oracle and benchmark peer | [`pcap`] |
//! | reading pcap and pcapng captures with libpcap's leniency | [`capture`] |
//! | reading a filter table file (`OWNER[/PRIORITY] FILTER` lines) | [`table_file`] |
//!
//! [`parse`] and [`compile`] are the front end's entry points:
//!
//! ```
//! let prog = dpf::compile("tcp dst port 80").unwrap();
//! let mut pkt = [0u8; 54];
//! pkt[12] = 0x08; // IPv4
//! pkt[14] = 0x45; // IHL 5
//! pkt[23] = 6; // TCP
//! pkt[36..38].copy_from_slice(&80u16.to_be_bytes());
//! assert!(prog.matches(&pkt));
//! print!("{}", dpf::dump(&prog));
//! ```
//!
//! [`Table`] is the run-time entry point: install and remove filters with
//! owners and priorities, and classify through a [`Reader`] per thread.
//!
//! Dependencies: `vcode` (the native code), `codecache` (where the
//! classifier is published and safely replaced), `arc-swap` (the merged
//! structure published beside the code, for the reference evaluator),
//! `thiserror` (errors), `ebpf` (the kernel interface the XDP lowering
//! loads and attaches through), and `libloading`, which loads libpcap at run time
//! in [`pcap`] so that the crate builds and runs without it.

pub mod capture;
pub mod codegen;
pub mod ebpf;
mod error;
pub mod ir;
pub mod lower;
pub mod merge;
pub mod pcap;
pub mod protocols;
pub mod services;
pub mod syntax;
pub mod table;
pub mod table_file;

pub use error::Error;
pub use lower::dump;
pub use table::{Batch, Classifier, FilterId, Prepared, Reader, Table};

/// Parses a filter in dpf's pcap-filter(7) subset (see [`syntax`]).
pub fn parse(src: &str) -> Result<syntax::Expr, Error> {
    syntax::parse(src)
}

/// Parses a filter and lowers it to its decision graph (see [`lower`]).
pub fn compile(src: &str) -> Result<ir::Program, Error> {
    lower::lower_checked(&syntax::parse(src)?)
}
