#!/usr/bin/env bash
# Installs the system packages fastpath's tests and benchmarks use, if they
# are missing: a JDK (jive's test applets are compiled by javac and its
# differential tests run HotSpot), valgrind (callgrind instruction counts),
# libpcap (dpf's differential tests and benchmark peer, loaded at run time),
# netbase (/etc/services and /etc/protocols: the port and protocol names
# dpf and libpcap read),
# iproute2 (`ip`: unet's tests between two network namespaces), the idl
# benchmark peers' code generators (protoc, capnp, flatc: crates/bench/build.rs),
# gcc and g++ (idl's generated C and C++, compiled and run against Rust in its
# tests; `cc`, which gcc provides, builds unet-capi's C example and header
# check), cmake and libclang (vcode's aarch64 emulation, feature `emu`), and
# gcc-aarch64-linux-gnu (the aarch64 kernels compared with gcc -O2).
# Needs root and apt-get; elsewhere it says what to install and carries on,
# and the tests that need a missing package skip with a printed reason.
#
# Each piece is detected by the very file its user loads or runs, never by a
# look-alike: bindgen loads `libclang.so`, `libclang.so.N` or `libclang-N.so*`
# and refuses `libclang-cpp.so*` (the C++ library that llvm alone installs);
# dpf opens `libpcap.so.1`, `libpcap.so.0.8` or `libpcap.so`. `--check` prints
# each check's verdict and installs nothing; scripts/test-install-deps.sh
# feeds the checks decoy trees and fails if a wrong file satisfies one.
set -euo pipefail

# Where the library checks look: a test points this at a decoy tree.
root="${INSTALL_DEPS_ROOT:-}"

# The directories the dynamic loader and clang-sys search on Debian.
lib_dirs() {
    local d
    for d in "$root"/usr/lib/llvm-*/lib "$root"/usr/lib/x86_64-linux-gnu \
        "$root"/usr/lib/aarch64-linux-gnu "$root"/usr/lib64 "$root"/usr/lib \
        "$root"/usr/local/lib "$root"/lib/x86_64-linux-gnu "$root"/lib; do
        [[ -d $d ]] && echo "$d"
    done
}

# A shared library bindgen (clang-sys) accepts as libclang.
have_libclang() {
    local d f name
    while read -r d; do
        for f in "$d"/libclang*.so*; do
            [[ -e $f ]] || continue
            name=${f##*/}
            # libclang.so, libclang.so.14, libclang-14.so, libclang-14.so.1;
            # not libclang-cpp.so.14 nor static archives or linker scripts.
            if [[ $name =~ ^libclang(-[0-9][0-9.]*)?\.so(\.[0-9][0-9.]*)?$ ]]; then
                return 0
            fi
        done
    done < <(lib_dirs)
    return 1
}

# A shared library dpf's `pcap.rs` opens.
have_libpcap() {
    local d
    while read -r d; do
        for n in libpcap.so.1 libpcap.so.0.8 libpcap.so; do
            [[ -e $d/$n ]] && return 0
        done
    done < <(lib_dirs)
    return 1
}

# A command on PATH (a file that can be executed, not a directory).
have_cmd() {
    local p
    p=$(command -v "$1" 2>/dev/null) || return 1
    [[ -f $p && -x $p ]]
}

# A database of netbase's (a file): /etc/services, from which dpf, as
# libpcap does, reads port names such as `port smtp`, and /etc/protocols,
# from which it reads protocol names such as `ip proto gre`.
have_file() {
    [[ -f $root/$1 ]]
}

# check NAME PACKAGE TEST...: record PACKAGE as needed unless TEST passes.
need=()
report=()
check() {
    local what=$1 pkg=$2
    shift 2
    if "$@"; then
        report+=("ok       $what")
    else
        report+=("missing  $what ($pkg)")
        need+=("$pkg")
    fi
}

check "javac" openjdk-17-jdk-headless have_cmd javac
check "java" openjdk-17-jdk-headless have_cmd java
check "valgrind" valgrind have_cmd valgrind
check "libpcap shared library" libpcap-dev have_libpcap
check "/etc/services" netbase have_file etc/services
check "/etc/protocols" netbase have_file etc/protocols
check "ip" iproute2 have_cmd ip
check "protoc" protobuf-compiler have_cmd protoc
check "capnp" capnproto have_cmd capnp
check "flatc" flatbuffers-compiler have_cmd flatc
check "gcc" gcc have_cmd gcc
check "cc" gcc have_cmd cc
check "g++" g++ have_cmd g++
# vcode's feature `emu` (the aarch64 backend under emulation) builds the
# Unicorn emulator from C source: cmake, and libclang for its bindings.
check "cmake" cmake have_cmd cmake
check "libclang shared library" libclang-dev have_libclang
# vcode's aarch64 kernels test compares with gcc -O2 for aarch64.
check "aarch64-linux-gnu-gcc" gcc-aarch64-linux-gnu have_cmd aarch64-linux-gnu-gcc
check "aarch64-linux-gnu-objcopy" binutils-aarch64-linux-gnu have_cmd aarch64-linux-gnu-objcopy

if [[ ${1:-} == --check ]]; then
    printf '%s\n' "${report[@]}"
    ((${#need[@]} == 0))
    exit
fi

if ((${#need[@]} == 0)); then
    exit 0
fi
# One package may answer several checks (the JDK).
mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)
if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "install-deps: installing ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
    # Whatever is still missing now is a broken install, not a skip.
    need=()
    report=()
    "$0" --check >/dev/null || {
        "$0" --check >&2 || true
        echo "install-deps: packages installed, but the checks above still fail" >&2
        exit 1
    }
else
    echo "install-deps: missing ${need[*]}; install them (e.g. apt-get install ${need[*]})." >&2
    echo "install-deps: the tests that need them will be skipped." >&2
fi
