#!/usr/bin/env bash
# Search efficiency per cost model on held-out convolutions, in replay:
# `mtgpu tune --simulate` answers every measurement from a recording, so each
# of random, xgb, gnn, gnn-transfer and gnn-meta runs many seeds in seconds.
# bench/replay_curves/replay_curves.py does the runs and the report.
#
#   bench/replay_curves/run.sh [DB]     (default data/opencl_dataset.db)
#
# Environment (defaults in brackets):
#   HOLDOUT         held-out networks or workloads ["resnet18;squeezenet1_1"]
#   MODELS          ["random xgb gnn gnn-transfer gnn-meta"]
#   SEEDS           [20]
#   TRIALS          [64]
#   META_MODEL      [data/opencl_gnn_meta.model]
#   TRANSFER_MODEL  [data/opencl_gnn_pooled.model]
#   OUT             [bench/replay_curves/results]
#   BUILD_DIR       [build-bench]
# Runtime: random takes a tenth of a second a run, xgb and the GNN kinds a few
# seconds (their training and scoring); the default set is about an hour on one core.
set -euo pipefail
cd "$(dirname "$0")/../.."
DB="${1:-data/opencl_dataset.db}"
BUILD="${BUILD_DIR:-build-bench}"
OUT="${OUT:-bench/replay_curves/results}"
cmd="bench/replay_curves/run.sh $DB"
for v in HOLDOUT MODELS SEEDS TRIALS META_MODEL TRANSFER_MODEL; do
  if [ -n "${!v:-}" ]; then cmd="$v=${!v@Q} $cmd"; fi
done
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DMTGPU_TESTS=OFF >/dev/null
cmake --build "$BUILD" -j"${JOBS:-$(nproc)}" --target mtgpu_cli >/dev/null
py=python3
for cand in "${PYTHON:-}" python3 /usr/bin/python3; do
  if [ -n "$cand" ] && "$cand" -c 'import matplotlib' 2>/dev/null; then py="$cand"; break; fi
done
exec "$py" bench/replay_curves/replay_curves.py --mtgpu "$BUILD/mtgpu" --db "$DB" --holdout "${HOLDOUT:-resnet18;squeezenet1_1}" \
  --models "${MODELS:-random xgb gnn gnn-transfer gnn-meta}" --seeds "${SEEDS:-20}" --trials "${TRIALS:-64}" \
  --meta-model "${META_MODEL:-data/opencl_gnn_meta.model}" --transfer-model "${TRANSFER_MODEL:-data/opencl_gnn_pooled.model}" \
  --out "$OUT" --command "$cmd"
