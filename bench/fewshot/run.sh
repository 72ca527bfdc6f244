#!/usr/bin/env bash
# Few-shot accuracy of the cost models on held-out convolutions: gnn-meta
# (MAML), gnn-transfer (pooled pre-training, then fine-tuning), gnn and xgb
# from scratch, after K = 0..64 measured configs of each held-out task; and,
# with a second platform's records, the same across platforms (pre-trained on
# B, adapted on A) with how differently the platforms rank the same configs.
# bench/fewshot/fewshot.py does the training, the runs and the report.
#
#   bench/fewshot/run.sh [DB_A [DB_B]]
#       (defaults data/opencl_dataset.db and, when it exists, data/opencl_1cu_dataset.db)
#
# Environment (defaults in brackets):
#   HOLDOUT     held-out workloads or networks, ';'-separated ["resnet18;squeezenet1_1"]
#   KS          measured configs per held-out task ["0 4 8 16 32 64"]
#   REPEATS     random draws of them per task [3]
#   MODELS      ["gnn-meta gnn-transfer gnn xgb"]
#   META_ARGS   extra `mtgpu train --meta` options [none: the defaults]
#   POOLED_ARGS extra `mtgpu train` options [none]
#   RETRAIN     1: train the models again even when OUT/models has them [0]
#   OUT         [bench/fewshot/results]
#   BUILD_DIR   [build-bench]
# Runtime: training dominates (meta-training a few minutes per thousand
# iterations on 2 cores); every eval-model run takes seconds to a minute.
set -euo pipefail
cd "$(dirname "$0")/../.."
DB_A="${1:-data/opencl_dataset.db}"
DB_B="${2:-}"
if [ -z "$DB_B" ] && [ -f data/opencl_1cu_dataset.db ]; then DB_B=data/opencl_1cu_dataset.db; fi
BUILD="${BUILD_DIR:-build-bench}"
OUT="${OUT:-bench/fewshot/results}"
cmd="bench/fewshot/run.sh $DB_A${DB_B:+ $DB_B}"
for v in HOLDOUT KS REPEATS MODELS META_ARGS POOLED_ARGS; do
  if [ -n "${!v:-}" ]; then cmd="$v=${!v@Q} $cmd"; fi
done
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DMTGPU_TESTS=OFF >/dev/null
cmake --build "$BUILD" -j"${JOBS:-$(nproc)}" --target mtgpu_cli >/dev/null
py=python3
for cand in "${PYTHON:-}" python3 /usr/bin/python3; do
  if [ -n "$cand" ] && "$cand" -c 'import matplotlib' 2>/dev/null; then py="$cand"; break; fi
done
extra=()
if [ "${RETRAIN:-0}" = 1 ]; then extra+=(--retrain); fi
exec "$py" bench/fewshot/fewshot.py --mtgpu "$BUILD/mtgpu" --db "$DB_A" ${DB_B:+--db-b "$DB_B"} \
  --holdout "${HOLDOUT:-resnet18;squeezenet1_1}" --ks "${KS:-0 4 8 16 32 64}" --repeats "${REPEATS:-3}" \
  --models "${MODELS:-gnn-meta gnn-transfer gnn xgb}" --meta-args "${META_ARGS:-}" --pooled-args "${POOLED_ARGS:-}" \
  --out "$OUT" --command "$cmd" "${extra[@]}"
