#!/usr/bin/env bash
# Installs the system packages fastpath's tests and benchmarks use, if they
# are missing: a JDK (jive's test applets are compiled by javac and its
# differential tests run HotSpot), valgrind (callgrind instruction counts),
# libpcap (dpf's differential tests and benchmark peer, loaded at run time),
# iproute2 (`ip`: unet's tests between two network namespaces), the idl
# benchmark peers' code generators (protoc, capnp, flatc: crates/bench/build.rs),
# gcc (idl's generated C, compiled and run against Rust in its tests), cmake
# and libclang (vcode's aarch64 emulation, feature `emu`), and
# gcc-aarch64-linux-gnu (the aarch64 kernels compared with gcc -O2).
# Needs root and apt-get; elsewhere it says what to install and carries on,
# and the tests that need a missing package skip with a printed reason.
set -euo pipefail

need=()
command -v javac >/dev/null 2>&1 || need+=(openjdk-17-jdk-headless)
command -v valgrind >/dev/null 2>&1 || need+=(valgrind)
[[ -e /usr/include/pcap/pcap.h || -e /usr/include/pcap.h ]] || need+=(libpcap-dev)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v protoc >/dev/null 2>&1 || need+=(protobuf-compiler)
command -v capnp >/dev/null 2>&1 || need+=(capnproto)
command -v flatc >/dev/null 2>&1 || need+=(flatbuffers-compiler)
command -v gcc >/dev/null 2>&1 || need+=(gcc)
# vcode's feature `emu` (the aarch64 backend under emulation) builds the
# Unicorn emulator from C source: cmake, and libclang for its bindings.
command -v cmake >/dev/null 2>&1 || need+=(cmake)
compgen -G "/usr/lib/llvm-*/lib/libclang*.so*" >/dev/null || need+=(libclang-dev)
# vcode's aarch64 kernels test compares with gcc -O2 for aarch64.
command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || need+=(gcc-aarch64-linux-gnu)

if ((${#need[@]} == 0)); then
    exit 0
fi
if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "install-deps: installing ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
else
    echo "install-deps: missing ${need[*]}; install them (e.g. apt-get install ${need[*]})." >&2
    echo "install-deps: the tests that need them will be skipped." >&2
fi
