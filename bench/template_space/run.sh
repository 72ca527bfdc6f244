#!/usr/bin/env bash
# Regenerates bench/results/template_space.{md,csv}: builds the release tree and
# runs bench_template_space (about 15-30 minutes on the 2-core machine).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DMTGPU_TESTS=OFF >/dev/null
cmake --build build-bench -j"$(nproc)" --target bench_template_space >/dev/null
# The nominal peak is the device's own estimate (cores x clock x FMA lanes) unless
# MTGPU_PEAK_GFLOPS gives one (the machines differ from session to session); the
# bench also measures the peak itself with an FMA microkernel, at its start.
./build-bench/bench_template_space --configs "${CONFIGS:-200}" --known bench/known_configs.txt --out bench/results "$@"
