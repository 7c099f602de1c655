//! The fast-path extraction (§4.2-§4.5): from a checked program and a
//! specification to optimized straight-line graphs.
//!
//! [`path`] turns each process's path expression into an automaton;
//! [`explore`] runs the symbolic execution that follows those automata
//! across process boundaries and emits a [`fp::Graph`]; [`opt`] optimizes
//! the graph (with `linear`, the strength reduction of xor-linear runs such
//! as the bit-by-bit CRC of a byte). [`fp`] also interprets a graph, the reference that the native
//! code of [`crate::fpgen`] is tested against. The extraction reads the
//! front end's output and knows no back end.

pub mod explore;
pub mod fp;
mod linear;
pub mod opt;
pub mod path;
