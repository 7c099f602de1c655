#!/usr/bin/env bash
# Tests scripts/install-deps.sh's checks against decoy trees: each check must
# be satisfied by the file its user really loads or runs, and by no
# look-alike. A fresh machine once had only llvm's `libclang-cpp.so.14`,
# which the old glob `libclang*.so*` took for libclang, so libclang-dev was
# never installed and bindgen failed; this keeps such a check out.
set -euo pipefail
cd "$(dirname "$0")/.."

pass=0
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# verdict NAME ROOT PATH: the --check line of NAME, with the library checks
# looking under ROOT and the command checks on PATH.
verdict() {
    INSTALL_DEPS_ROOT=$2 PATH=$3 /bin/bash scripts/install-deps.sh --check 2>/dev/null |
        grep -F -- " $1" | head -n1 | awk '{print $1}' || true
}

# expect WANT NAME SETUP...: in a fresh decoy tree where SETUP made its
# files, the check NAME says WANT ("ok" or "missing").
expect() {
    local want=$1 name=$2
    shift 2
    local root="$tmp/case$((pass + fail))"
    mkdir -p "$root/bin"
    (cd "$root" && eval "$*")
    # The command checks see only the decoy bin and the shell's own basics.
    local got
    got=$(verdict "$name" "$root" "$root/bin")
    if [[ $got == "$want" ]]; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL: $name with [$*]: expected $want, got '${got:-nothing}'" >&2
    fi
}

L=usr/lib/llvm-14/lib
# libclang: only the library bindgen loads counts.
expect missing "libclang shared library" "mkdir -p $L && touch $L/libclang-cpp.so.14"
expect missing "libclang shared library" "mkdir -p $L && touch $L/libclang-cpp.so"
expect missing "libclang shared library" "mkdir -p $L && touch $L/libclang.a $L/libclangBasic.a"
expect missing "libclang shared library" "mkdir -p $L && touch $L/libclangAST.so.14"
expect missing "libclang shared library" "true"
expect ok "libclang shared library" "mkdir -p $L && touch $L/libclang.so"
expect ok "libclang shared library" "mkdir -p $L && touch $L/libclang.so.1"
expect ok "libclang shared library" "mkdir -p $L && touch $L/libclang-14.so.1"
expect ok "libclang shared library" "mkdir -p usr/lib/x86_64-linux-gnu && touch usr/lib/x86_64-linux-gnu/libclang-14.so.14.0.6"
# libpcap: the names dpf opens, not its header or a static archive.
P=usr/lib/x86_64-linux-gnu
expect missing "libpcap shared library" "mkdir -p usr/include/pcap $P && touch usr/include/pcap/pcap.h $P/libpcap.a"
expect missing "libpcap shared library" "mkdir -p $P && touch $P/libpcap.so.2"
expect ok "libpcap shared library" "mkdir -p $P && touch $P/libpcap.so.0.8"
expect ok "libpcap shared library" "mkdir -p $P && touch $P/libpcap.so.1"
# The services and protocols databases: files, not directories of that name.
expect missing "/etc/services" "mkdir -p etc/services"
expect ok "/etc/services" "mkdir -p etc && touch etc/services"
expect missing "/etc/protocols" "mkdir -p etc/protocols"
expect ok "/etc/protocols" "mkdir -p etc && touch etc/protocols"
# Commands: an executable file, not a directory or a file without x bits.
expect missing "javac" "mkdir -p bin/javac"
expect missing "javac" "touch bin/javac"
expect ok "javac" "printf '#!/bin/sh\n' > bin/javac && chmod +x bin/javac"
# g++ is not satisfied by gcc.
expect missing "g++" "printf '#!/bin/sh\n' > bin/gcc && chmod +x bin/gcc"
expect ok "g++" "printf '#!/bin/sh\n' > bin/g++ && chmod +x bin/g++"

echo "install-deps checks: $pass passed, $fail failed"
((fail == 0))
