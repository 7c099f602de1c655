//! # dpf: dynamic packet filters
//!
//! DPF after Engler, *VCODE*, PLDI 1996, §4.2: many packet filters, written
//! in a subset of pcap-filter(7) syntax, merged into one decision structure
//! and compiled through `vcode` into one native classifier.
//!
//! | phase | module |
//! |---|---|
//! | filter program representation and its reference semantics | [`ir`] |

pub mod ir;
