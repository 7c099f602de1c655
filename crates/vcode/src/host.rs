//! The host register file and calling convention, as data: register
//! names, argument order, which registers the backends keep for
//! themselves, the fixed names `T<k>`/`S<k>`, and the order in which
//! `getreg` hands registers out.
//!
//! Both backends use this one description, so a program that runs on the
//! reference backend allocates exactly the registers it gets natively. It
//! is the host target's section 1 ("registers and classes"), kept in the
//! target's file: on x86-64, [`x86_64::regfile`](crate::x86_64::regfile) (System
//! V). A second target's file has a `regfile` module of the same shape, and
//! this module chooses by the host's architecture.

pub use crate::x86_64::regfile::*;
