//! Code generation for the peers of the idl suite (`fastpath bench idl`):
//! the schemas in `peers/idl/` compiled by each peer's own generator,
//! into `$OUT_DIR`, for `include!` by `src/idl/schema.rs`:
//!
//! * `pfs.proto` by `prost-build` (runs `protoc`) into `pfs.rs`;
//! * `pfs.capnp` by `capnpc` (runs `capnp compile`) into `pfs_capnp.rs`;
//! * `pfs.fbs` by `flatc --rust` into `pfs_generated.rs`.
//!
//! The three compilers are system packages (protobuf-compiler, capnproto,
//! flatbuffers-compiler) that `scripts/install-deps.sh` installs.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let dir = Path::new("peers/idl");
    for f in ["pfs.proto", "pfs.capnp", "pfs.fbs"] {
        println!("cargo:rerun-if-changed={}", dir.join(f).display());
    }
    println!("cargo:rerun-if-changed=build.rs");

    if let Err(e) = prost_build::Config::new().compile_protos(&[dir.join("pfs.proto")], &[dir]) {
        fail("protoc", "protobuf-compiler", &e.to_string());
    }

    if let Err(e) = capnpc::CompilerCommand::new()
        .src_prefix(dir)
        .file(dir.join("pfs.capnp"))
        .default_parent_module(vec!["idl".into(), "schema".into()])
        .run()
    {
        fail("capnp", "capnproto", &e.to_string());
    }

    match Command::new("flatc")
        .arg("--rust")
        .arg("-o")
        .arg(&out)
        .arg(dir.join("pfs.fbs"))
        .output()
    {
        Ok(o) if o.status.success() => {}
        Ok(o) => fail(
            "flatc",
            "flatbuffers-compiler",
            &String::from_utf8_lossy(&o.stderr),
        ),
        Err(e) => fail("flatc", "flatbuffers-compiler", &e.to_string()),
    }
}

/// Stops the build with what is missing and how to get it.
fn fail(tool: &str, package: &str, why: &str) -> ! {
    panic!(
        "fastpath-bench: generating the idl suite's {tool} peer failed: {why}\n\
         (is `{tool}` installed? `bash scripts/install-deps.sh` installs {package})"
    );
}
