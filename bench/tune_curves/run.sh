#!/usr/bin/env bash
# Regenerates bench/tune_curves/results/tune_curves.{csv,md,png}: builds the release tree,
# runs bench_tune_curves (3 ResNet-50 convolutions x {random, xgb, gnn} x 3 seeds x
# 300 trials by default: several hours on the 2-core machine), then bench/tune_curves/plot.py.
#
# Overrides (environment): TRIALS, SEEDS, LAYERS, MODELS, TIME_LIMIT_PER_RUN,
# OUT (default bench/tune_curves/results), RESUME=1 (keep the runs already in
# OUT/tune_curves.csv, measure only the missing ones: the full set can be
# done over several sittings on one machine), DB_DIR (keep each run's records
# database there), PYTHON (one with matplotlib), BUILD_DIR (default
# build-bench, relative to the repository root); further arguments
# go to bench_tune_curves. Example, a quick look:
#   TRIALS=50 SEEDS=1 LAYERS=3x3_256_14 OUT=/tmp/curves bench/tune_curves/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD="${BUILD_DIR:-build-bench}"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DMTGPU_TESTS=OFF >/dev/null
# The worker times the kernels; the bench finds it in the build tree.
cmake --build "$BUILD" -j"$(nproc)" --target bench_tune_curves mtgpu_worker >/dev/null
OUT="${OUT:-bench/tune_curves/results}"
args=(--trials "${TRIALS:-300}" --seeds "${SEEDS:-3}" --out "$OUT")
[ -n "${LAYERS:-}" ] && args+=(--layers "$LAYERS")
[ -n "${MODELS:-}" ] && args+=(--models "$MODELS")
[ -n "${TIME_LIMIT_PER_RUN:-}" ] && args+=(--time-limit-per-run "$TIME_LIMIT_PER_RUN")
[ "${RESUME:-0}" = 1 ] && args+=(--resume)
[ -n "${DB_DIR:-}" ] && args+=(--db-dir "$DB_DIR")
rc=0
"$BUILD"/bench_tune_curves "${args[@]}" "$@" || rc=$?
# Plot whatever was written, also after a failed or interrupted run.
py=""
for cand in "${PYTHON:-}" python3 /usr/bin/python3; do
  if [ -n "$cand" ] && "$cand" -c 'import matplotlib' 2>/dev/null; then py="$cand"; break; fi
done
if [ -f "$OUT/tune_curves.csv" ]; then
  if [ -n "$py" ]; then "$py" bench/tune_curves/plot.py "$OUT" || rc=1
  else echo "tune_curves: no python3 with matplotlib (bench/common/setup.sh installs it); no plot" >&2; rc=1; fi
fi
exit $rc
