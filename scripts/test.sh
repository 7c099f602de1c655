#!/usr/bin/env bash
# The whole test suite: installs the system packages the tests use, then runs
# every unit, integration, differential and doc test of the workspace at the
# sizes CI uses (10,000 random vcode programs, 100,000 class-file mutations).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
export VCODE_DIFF_CASES="${VCODE_DIFF_CASES:-10000}"
export JIVE_MUTATIONS="${JIVE_MUTATIONS:-100000}"
cargo test --workspace --release
