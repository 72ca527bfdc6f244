#!/usr/bin/env bash
# Builds mtgpu with AddressSanitizer + UndefinedBehaviorSanitizer and runs every
# test (ctest), then builds the inference library alone and runs the embedding
# example against it, then a short libFuzzer run of each parser harness.
#   scripts/test.sh [BUILD_DIR]     (default: build-test)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build-test}"
scripts/setup.sh
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMTGPU_SANITIZE=ON >/dev/null
cmake --build "$build" -j"$(nproc)"
ctest --test-dir "$build" --output-on-failure -j1
# The inference library alone (MTGPU_TUNING=OFF: no XGBoost, no OpenBLAS):
# it builds, and the embedding example links against it and runs.
cmake -S . -B "$build-inference" -DCMAKE_BUILD_TYPE=Release -DMTGPU_TUNING=OFF >/dev/null
cmake --build "$build-inference" -j"$(nproc)" --target mtgpu public_headers_alone
ctest --test-dir "$build-inference" --output-on-failure -R 'test_example|test_layers'
if [ -x fuzz/run.sh ]; then
  fuzz/run.sh "${FUZZ_SECONDS:-5}"
fi
