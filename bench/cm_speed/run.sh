#!/usr/bin/env bash
# Regenerates bench/cm_speed/results/cm_speed.{md,json}: candidates scored per second
# and peak memory of each cost model (a few minutes on the 2-core machine).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD="${BUILD_DIR:-build-bench}"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DMTGPU_TESTS=OFF >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target bench_cm_speed >/dev/null
# The CUDA module too where the toolkit is there: the GNN scores on a GPU where one is present.
if grep -q "^MTGPU_HAVE_CUDA:INTERNAL=ON" "$BUILD/CMakeCache.txt" 2>/dev/null || [ -f "$BUILD/CMakeFiles/mtgpu_cuda.dir/build.make" ]; then
  cmake --build "$BUILD" -j"$(nproc)" --target mtgpu_cuda >/dev/null
fi
mkdir -p "${OUT:-bench/cm_speed/results}"
"$BUILD"/bench_cm_speed --out "${OUT:-bench/cm_speed/results}" --threads "$(nproc)" "$@"
