#!/usr/bin/env bash
# Builds mtgpu with AddressSanitizer + UndefinedBehaviorSanitizer and runs every
# test (ctest), then a short libFuzzer run of each parser harness.
#   scripts/test.sh [BUILD_DIR]     (default: build-test)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build-test}"
scripts/setup.sh
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMTGPU_SANITIZE=ON >/dev/null
cmake --build "$build" -j"$(nproc)"
ctest --test-dir "$build" --output-on-failure -j1
if [ -x fuzz/run.sh ]; then
  fuzz/run.sh "${FUZZ_SECONDS:-5}"
fi
