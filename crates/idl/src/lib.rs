//! idl: an IDL compiler whose stubs marshal by direct transfer of the
//! argument layout, after IDL4 (Haeberlen, Liedtke, Park, Reuther, Uhlig,
//! *Stub-Code Performance is Becoming Important*, 2000).
//!
//! Between two processes that share memory the transport costs a cache
//! line, so the stubs are the cost. fastpath's stubs make the message
//! layout the argument layout (§3.2): a request is one `#[repr(C)]` record
//! of the in and inout values, sorted in, inout, out; the reply reuses the
//! record in place; strings and sequences stay in a shared string area and
//! the record carries their (offset, length) (§3.3). Marshalling is storing
//! the arguments; unmarshalling is a bounds check.
//!
//! | piece | module | follows |
//! |---|---|---|
//! | the IDL: lexer, parser, static checks, layout | [`parse`], [`model`] | IDL4 §3.2, §3.3, §4 |
//! | Rust stubs, server trait, server loop; the `build.rs` helper | [`gen_rust`], [`compile`] | §3.1, §4 (Tables 1, 2) |
//! | C header and source of the same layout | [`gen_c`] | §4 |
//! | dynamic stubs: an interface loaded at run time, stubs by vcode | [`dynamic`] | beyond the paper |
//! | the wire format, the transports' traits, checked requests | [`rt`] | §2.1 (L4 IPC) |
//! | a synchronous call through one shared `memfd`: spin, then futex | [`rt::shm`] | |
//! | the same stubs over unet channels, to another host | [`rt::unet`] | |
//!
//! Dependencies: `vcode` (dynamic stubs), `unet` (its endpoints as a
//! transport to other hosts), `libc` (memfd, mmap, futex), `thiserror`.

mod clash;
pub mod dynamic;
pub mod error;
pub mod gen_c;
pub mod gen_rust;
mod lexer;
pub mod model;
mod parser;
pub mod rt;
mod sema;

pub use error::CompileError;
pub use model::{Dir, Idl, Interface, Layout, LimitName, Limits, Op, Param, Pos, Prim, Type};

/// Parses and checks an IDL source with the default [`Limits`].
pub fn parse(src: &str) -> Result<Idl, CompileError> {
    parse_with(src, &Limits::default())
}

/// Parses and checks an IDL source, laying out every operation's message
/// within `limits`.
pub fn parse_with(src: &str, limits: &Limits) -> Result<Idl, CompileError> {
    let ast = parser::parse(src)?;
    sema::check(&ast, limits)
}

/// The `build.rs` helper: compiles `path` (an IDL file) into Rust stubs
/// written to `$OUT_DIR/<stem>.rs`, for `include!`, as `prost-build` and
/// `capnpc` do. Prints `cargo:rerun-if-changed` for the file.
pub fn compile(path: impl AsRef<std::path::Path>) -> Result<std::path::PathBuf, CompileError> {
    gen_rust::compile_file(path.as_ref())
}
