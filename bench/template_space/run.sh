#!/usr/bin/env bash
# Regenerates bench/template_space/results/template_space.{md,csv}: builds the release tree and
# runs bench_template_space (about 15-30 minutes on the 2-core machine).
#
# Environment (defaults in brackets): CONFIGS random configs per template and
# layer [200], OUT [bench/template_space/results], BUILD_DIR [build-bench,
# relative to the repository root]; further arguments go to bench_template_space.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD="${BUILD_DIR:-build-bench}"
OUT="${OUT:-bench/template_space/results}"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DMTGPU_TESTS=OFF >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target bench_template_space >/dev/null
mkdir -p "$OUT"
# The nominal peak is the device's own estimate (cores x clock x FMA lanes) unless
# MTGPU_PEAK_GFLOPS gives one (the development machine has changed over time); the
# bench also measures the peak itself with an FMA microkernel, at its start.
"$BUILD"/bench_template_space --configs "${CONFIGS:-200}" --known bench/common/known_configs.txt --out "$OUT" "$@"
