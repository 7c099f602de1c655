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
//!
//! It also compiles the C family of the suite's instruction counts into a
//! static library `idlb_c` (the `cc` crate, with the system's C compiler):
//! `src/idl/c/pfs_bench.c`, `idl::gen_c`'s stubs of `pfs_bench.idl` (kept
//! current by a test, as `generated_pfs.rs` is), the C runtime
//! `crates/idl/c/idl_rt.c`, and `src/idl/c/loop.c`, the loopback carrier.
//! The stubs are compiled through `src/idl/c/pfs_bench_loop.c`, which
//! defines `idl_client_call` as the carrier's `idlb_c_loop_call` before it
//! includes them, so that a call runs the server's dispatch in place
//! instead of posting and waiting on the channel.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let dir = Path::new("peers/idl");
    for f in ["pfs.proto", "pfs.capnp", "pfs.fbs"] {
        println!("cargo:rerun-if-changed={}", dir.join(f).display());
    }
    println!("cargo:rerun-if-changed=build.rs");
    compile_c_family();

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

/// The static library `idlb_c`: the generated C stubs of `pfs_bench.idl`
/// over the loopback carrier, and the C runtime.
fn compile_c_family() {
    let dir = Path::new("src/idl/c");
    let rt = Path::new("../idl/c");
    for f in [
        dir.join("pfs_bench.h"),
        dir.join("pfs_bench.c"),
        dir.join("pfs_bench_loop.c"),
        dir.join("loop.c"),
        rt.join("idl_rt.h"),
        rt.join("idl_rt.c"),
    ] {
        println!("cargo:rerun-if-changed={}", f.display());
    }
    let mut b = cc::Build::new();
    b.std("c11")
        .include(dir)
        .include(rt)
        .warnings_into_errors(true)
        .file(rt.join("idl_rt.c"))
        .file(dir.join("pfs_bench_loop.c"))
        .file(dir.join("loop.c"));
    if let Err(e) = b.try_compile("idlb_c") {
        fail("cc", "gcc", &e.to_string());
    }
}

/// Stops the build with what is missing and how to get it.
fn fail(tool: &str, package: &str, why: &str) -> ! {
    panic!(
        "fastpath-bench: generating the idl suite's {tool} peer failed: {why}\n\
         (is `{tool}` installed? `bash scripts/install-deps.sh` installs {package})"
    );
}
