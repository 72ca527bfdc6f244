#!/usr/bin/env bash
# How much of the second (and every further) core a network's kernels get:
# `mtgpu run NETWORK --profile` with PoCL's CPU device limited to one worker
# thread and with its default (one worker per core), and oneDNN's
# `bench_onednn_net NETWORK --profile` on one OpenMP thread and on its
# default, all in turns. Per layer the time of each, the speed-up and the
# time beyond an even split (all-threads time less one-thread time / cores):
# what a layer loses to its threads not starting together or not sharing
# evenly. Writes $OUT/$NAME.md and .json (bench/core_scaling/report.py).
#
#   bench/core_scaling/run.sh [DB]   (MobileNetV2, 3 rounds: about 2 minutes; ResNet-50 about 6)
#
# Environment (defaults in brackets): NETWORK [mobilenet_v2], ROUNDS [3],
# REPEAT [20] passes per profile, BUILD_DIR [build-bench],
# OUT [bench/core_scaling/results], NAME [NETWORK].
set -euo pipefail
cd "$(dirname "$0")/../.."
usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; }
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then usage; exit 0; fi
if [ $# -gt 1 ]; then usage >&2; exit 2; fi
DB="${1:-}"
NETWORK="${NETWORK:-mobilenet_v2}"
ROUNDS="${ROUNDS:-3}"
REPEAT="${REPEAT:-20}"
OUT="${OUT:-bench/core_scaling/results}"
NAME="${NAME:-$NETWORK}"
BUILD="${BUILD_DIR:-build-bench}"
log() { echo "core_scaling: $*" >&2; }
[ -z "$DB" ] || [ -f "$DB" ] || { log "no database $DB"; exit 2; }

# shellcheck source=../common/network_bins.sh
. bench/common/network_bins.sh
mtgpu="$bin/mtgpu"
raw="$OUT/raw/$NAME"
network_db_and_raw "$DB"

# PoCL 3.1 takes its worker count from POCL_MAX_PTHREAD_COUNT, later versions from POCL_CPU_MAX_CU_COUNT.
# oneDNN at OpenMP's defaults (as bench/vs_onednn times it) or on one thread.
sides=(all one onednn-all onednn-one)
for ((r = 0; r < ROUNDS; r++)); do
  for ((i = 0; i < ${#sides[@]}; i++)); do
    side=${sides[$(((i + r) % ${#sides[@]}))]}
    log "round $((r + 1))/$ROUNDS: $side"
    case $side in
      all) env -u POCL_MAX_PTHREAD_COUNT -u POCL_CPU_MAX_CU_COUNT \
        "$mtgpu" run "$NETWORK" ${dbargs[@]+"${dbargs[@]}"} --repeat "$REPEAT" --profile --json ;;
      one) env -u POCL_MAX_PTHREAD_COUNT -u POCL_CPU_MAX_CU_COUNT POCL_MAX_PTHREAD_COUNT=1 POCL_CPU_MAX_CU_COUNT=1 \
        "$mtgpu" run "$NETWORK" ${dbargs[@]+"${dbargs[@]}"} --repeat "$REPEAT" --profile --json ;;
      onednn-all) env -u OMP_NUM_THREADS -u OMP_WAIT_POLICY "$bin/bench_onednn_net" "$NETWORK" --profile --repeat "$REPEAT" --json ;;
      onednn-one) env -u OMP_WAIT_POLICY OMP_NUM_THREADS=1 "$bin/bench_onednn_net" "$NETWORK" --profile --repeat "$REPEAT" --json ;;
    esac >"$raw/$side-$r.json"
  done
done

python3 bench/core_scaling/report.py --raw "$raw" --out "$OUT/$NAME" --network "$NETWORK" --db "${DB:-none (default configs)}" \
  --rounds "$ROUNDS" --repeat "$REPEAT" --cpu "$(PYTHONPATH=bench/common python3 -c 'import benchlib; print(benchlib.cpu_model())')" \
  --cores "$(nproc)" --commit "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
  --command "NETWORK=$NETWORK ROUNDS=$ROUNDS bench/core_scaling/run.sh${DB:+ $DB}"
