#!/usr/bin/env bash
# The whole test suite: installs the system packages the tests use, then runs
# every unit, integration, differential and doc test of the workspace at the
# sizes CI uses (10,000 random vcode programs, 100,000 class-file mutations).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
export VCODE_DIFF_CASES="${VCODE_DIFF_CASES:-10000}"
export JIVE_MUTATIONS="${JIVE_MUTATIONS:-100000}"
export DPF_PAIRS="${DPF_PAIRS:-100000}"
export DPF_REQUIRE_LIBPCAP="${DPF_REQUIRE_LIBPCAP:-1}"
export CODECACHE_STRESS_SECS="${CODECACHE_STRESS_SECS:-10}"
# unet's randomized soak (crates/unet/tests/soak.rs): clients creating and
# closing endpoints, opening channels, sending, filtering, for this long.
export UNET_SOAK_SECS=${UNET_SOAK_SECS:-60}
# unet's multi-host tests (two network namespaces and a veth pair) need
# root and `ip`; in CI their absence is a failure, not a skip.
export UNET_REQUIRE_NETNS="${UNET_REQUIRE_NETNS:-1}"
# The eBPF tests (crates/ebpf, dpf's XDP lowering and its differential
# against the native classifier and libpcap) load and test-run XDP programs,
# and unet's multi-host tests run over the `xdp` transport (AF_XDP sockets
# fed by an XDP program on the veth pair) too: both need root, bpf(2) and
# AF_XDP; in CI their absence is a failure, not a skip.
export UNET_REQUIRE_XDP="${UNET_REQUIRE_XDP:-1}"
# idl's C interop tests compile generated C with gcc; in CI its absence
# is a failure, not a skip.
export IDL_REQUIRE_GCC="${IDL_REQUIRE_GCC:-1}"
# unet-capi's C example and header check compile C with cc; likewise.
export UNET_CAPI_REQUIRE_CC="${UNET_CAPI_REQUIRE_CC:-1}"
# The exact count of the idl stubs (dynamic against static over the same
# shared-memory channel) runs under callgrind, which install-deps installs.
export IDL_REQUIRE_VALGRIND="${IDL_REQUIRE_VALGRIND:-1}"
# With the fastpath CLI's `bench` feature (its benchmark suites) and its
# `aarch64` feature, which turns on vcode's `emu` for the whole build: the
# aarch64 backend's tests under emulation (the regression table, 10,000
# differential programs against the reference backend, the kernels against
# gcc -O2) run here with the rest, as does `fastpath vcode demo --target
# aarch64`. Then the CLI once more in its default build, the README's,
# without them.
cargo test --workspace --release --features fastpath/bench,fastpath/aarch64
# jive's adversarial applets once more under valgrind memcheck, on the
# interpreter and the JIT: no read or write past the ends of the applet's memory.
# --smc-check=all: vcode writes code through a second mapping of a memfd,
# which valgrind's default (all-non-file) does not watch, so code patched or
# reused in place would run as stale translations. Wider redzones catch
# accesses further past the ends of arrays.
if command -v valgrind >/dev/null 2>&1; then
    adversarial=$(cargo test -p jive --release --test adversarial --no-run --message-format=json |
        sed -n 's/.*"executable":"\([^"]*\)".*/\1/p')
    valgrind -q --error-exitcode=1 --tool=memcheck --smc-check=all --redzone-size=128 "$adversarial"
else
    echo "test.sh: valgrind is missing, so the memcheck run of jive's adversarial applets is skipped" >&2
fi
cargo test -p fastpath --release
# codecache's loom models (publish/lookup/remove/resize, delayed deletion),
# in their own target dir so the cfg does not invalidate the main build.
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
    cargo test -p codecache --release --test loom
# unet's loom models of the endpoint queues (transmit, receive, free), of
# an applet's cross-thread inbox (about 190 s on two cores) and of the biased
# side lock (whose fast path reads its own slot without an atomic load:
# loom's `unsync_load` there checks that every store happened before).
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
    cargo test -p unet --release --test loom --test loom_inbox --test loom_biased
