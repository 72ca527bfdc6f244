#!/usr/bin/env bash
# MetaTune's table: networks held out of the cost models' pre-training, tuned
# with 32 and 64 trials per task by xgb, gnn-transfer and gnn-meta, then run
# whole (`mtgpu run`): network latency, convolution time and tuning time, all
# latencies measured in turns in one window. bench/meta_table/meta_table.py
# does the work.
#
#   bench/meta_table/run.sh
#
# Environment (defaults in brackets):
#   NETS            ["squeezenet1_1 resnet18"]; each must be held out of both model files
#   MODELS          ["xgb gnn-transfer gnn-meta"]
#   META_MODEL      [data/opencl_gnn_meta.model]
#   TRANSFER_MODEL  [data/opencl_gnn_pooled.model]
#   BUDGETS         trials per task ["32 64"]
#   ROUNDS          measuring rounds, in turns [3]
#   REPEAT          timed passes per `mtgpu run` [20]
#   OUT             [bench/meta_table/results]
#   WORK            databases, logs, finished runs (an interrupted run resumes) [~/.cache/mtgpu/meta_table]
#   BUILD_DIR       [build-bench]
# Runtime: about a second per trial on 2 cores: 64 x 18 tasks x 3 models for SqueezeNet is about an hour.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD="${BUILD_DIR:-build-bench}"
OUT="${OUT:-bench/meta_table/results}"
WORK="${WORK:-${XDG_CACHE_HOME:-$HOME/.cache}/mtgpu/meta_table}"
cmd="bench/meta_table/run.sh"
for v in NETS MODELS META_MODEL TRANSFER_MODEL BUDGETS ROUNDS REPEAT; do
  if [ -n "${!v:-}" ]; then cmd="$v=${!v@Q} $cmd"; fi
done
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DMTGPU_TESTS=OFF >/dev/null
cmake --build "$BUILD" -j"${JOBS:-$(nproc)}" --target mtgpu_cli mtgpu_worker >/dev/null
exec python3 bench/meta_table/meta_table.py --mtgpu "$BUILD/mtgpu" --nets "${NETS:-squeezenet1_1 resnet18}" \
  --models "${MODELS:-xgb gnn-transfer gnn-meta}" --meta-model "${META_MODEL:-data/opencl_gnn_meta.model}" \
  --transfer-model "${TRANSFER_MODEL:-data/opencl_gnn_pooled.model}" --budgets "${BUDGETS:-32 64}" \
  --rounds "${ROUNDS:-3}" --repeat "${REPEAT:-20}" --work "$WORK" --out "$OUT" --command "$cmd"
