//! # vcode-kernels: the generation workload and the kernels, shared
//!
//! The vcode client code that both vcode's own tests and the benchmark
//! crate run, kept in one development-only crate (`publish = false`) so
//! that neither includes the other's source:
//!
//! * [`workload`]: the generation-cost workload of `docs/benchmarks.md`
//!   (vcode sections 1, 5 and 6): a function of about 100 mixed
//!   instructions with `getreg` registers or the fixed names, the empty
//!   function, and a branch-heavy variant. `fastpath-bench`'s
//!   `vcode-count` and vcode's `aarch64_gencount` example count its
//!   generation under callgrind; vcode's `aarch64_smoke` and
//!   `aarch64_far` tests run it on the aarch64 backend.
//! * [`kernel_code`]: the four scalar kernels (sieve, binary search,
//!   Internet checksum, Collatz), each in Rust and as a vcode generator
//!   written once over the backend. `fastpath bench codegen` times them
//!   against rustc; vcode's `aarch64_kernels` test runs them under
//!   emulation against gcc.
//!
//! It depends on vcode; vcode takes it as a dev-dependency only (a cycle
//! Cargo allows for tests, examples and benchmarks), and
//! `fastpath-bench` as an ordinary one.
//!
//! ## Dependencies
//!
//! * `vcode`: what the workload and the kernels are written against.

pub mod kernel_code;
pub mod workload;
#[cfg(test)]
mod workload_tests;
