//! The peers' generated code, from the schemas in `crates/bench/peers/idl/`
//! (see `build.rs`): prost's messages, capnpc's readers and builders,
//! flatc's tables. Generated code is not ours to document or lint.

/// prost's messages (`pfs.proto`).
#[allow(missing_docs, clippy::all)]
pub mod pb {
    include!(concat!(env!("OUT_DIR"), "/pfs.rs"));
}

/// capnpc's readers and builders (`pfs.capnp`).
#[allow(missing_docs, clippy::all, unused_qualifications)]
pub mod pfs_capnp {
    include!(concat!(env!("OUT_DIR"), "/pfs_capnp.rs"));
}

/// flatc's tables (`pfs.fbs`).
#[allow(missing_docs, clippy::all, unused_imports, dead_code, unsafe_code)]
#[allow(clippy::undocumented_unsafe_blocks)]
pub mod fb {
    include!(concat!(env!("OUT_DIR"), "/pfs_generated.rs"));
}
