//! A C API for unet endpoints: `include/unet.h` and this crate built as a
//! static (`libunet_capi.a`) or shared (`libunet_capi.so`) library.
//!
//! A C application connects to a `fastpath engine --socket PATH` daemon
//! ([`unet::client`]) or starts an engine in its own process on the `loop`
//! transport, creates endpoints, opens channels, installs dpf filters and
//! JIVE applets, sends and receives (copying between its buffers and the
//! endpoint's, in place through a callback, or by hand: the buffer area
//! mapped in its process, transmit descriptors it pushes and receive
//! descriptors whose buffers it gives back), and reads an endpoint's
//! counters and its engine's own (an in-process engine's, or a daemon's
//! within the daemon's budget of reads):
//!
//! ```c
//! unet_client c;
//! unet_endpoint ep;
//! if (unet_connect("/run/fastpath.sock", &c) != UNET_OK ||
//!     unet_endpoint_create(c, NULL, NULL, 0, &ep) != UNET_OK)
//!     fprintf(stderr, "unet: %s\n", unet_last_error());
//! ```
//!
//! # Contract
//!
//! - Every function returns 0 (`UNET_OK`) or a negative `UNET_E*` code;
//!   `unet_strerror(code)` describes the code and `unet_last_error()` gives
//!   the failed call's own message (the typed Rust error: what and where),
//!   per thread.
//! - Handles (`unet_client`, `unet_endpoint`, `unet_engine`) are numbers
//!   checked against a table, never pointers: a zero, closed (double close)
//!   or made-up handle, or one of another kind, is `UNET_EBADHANDLE`.
//! - NULL where a pointer is required is `UNET_ENULL`; a receive buffer
//!   smaller than the message is `UNET_ENOSPC` and the message stays
//!   queued; an offset, length or descriptor number outside the
//!   endpoint's area or queue is `UNET_ERANGE` (checked before any byte
//!   is read); a buffer given back that no receive handed out, or given
//!   back twice, is `UNET_ENOTHELD`; no Rust panic crosses the boundary
//!   (each function catches them: `UNET_EPANIC`).
//! - Calls on one endpoint from several threads are serialized; a
//!   receive that waits holds its endpoint for the wait, and an in-place
//!   callback holds its endpoint while it runs: an endpoint call from
//!   inside one is refused (`UNET_EDEADLK`) rather than left to deadlock.
//!
//! All `unsafe` is in [`ffi`]; the behaviour is in [`api`], in safe Rust
//! ([`lock`] is an endpoint's lock).
//! The header is written by hand (cbindgen is not in this environment's
//! crate registry); `tests/header.rs` compiles and links a C file that
//! takes every function's address with the prototype derived from the
//! Rust signature, and checks that the header declares exactly the
//! exported functions, structs of the same size and the same codes.

pub mod api;
pub mod ffi;
pub mod lock;
