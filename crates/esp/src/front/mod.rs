//! The front end: program source to [`crate::ir::Program`], and
//! specification files to [`crate::spec::Spec`].
//!
//! [`lex`] tokenizes both; [`parse`] builds the program's syntax tree
//! ([`ast`]); [`sema`] resolves names, applies the static checks and lowers
//! the tree to the IR; [`spec`] parses a specification and resolves it
//! against a checked program; [`hostfn`] compiles host functions written as
//! ESP expressions. Nothing here depends on the extraction or a back end.

pub mod ast;
pub mod hostfn;
pub mod lex;
pub mod parse;
pub mod sema;
pub mod spec;
