#!/usr/bin/env bash
# How well the tuner spends a budget, with no device noise: `mtgpu tune
# NETWORK --simulate DB` answers every measurement from recorded times, so two
# builds (BASE and the working tree) replay the same recordings with the same
# seeds and differ only in what they chose to measure. Per network, budget and
# cost model: the median over seeds of the network's time (the sum of each
# task's fastest measured time x its count) for both builds, its ratio, the
# share of trials spent on the template each task ended on, and the gap to
# the best the recording holds (every recorded config measured, no early stop).
# Writes $OUT/$NAME.md and .json (bench/scheduler_replay/report.py).
#
#   bench/scheduler_replay/run.sh [NETWORK=DB ...]
#
# Each argument replays NETWORK from the recording DB (its device with the most
# records of those tasks); default: the held-out networks of the shipped models
# on the committed platform-A data set, resnet18=data/opencl_dataset.db
# squeezenet1_1=data/opencl_dataset.db (about 8 minutes on the 2-core machine);
# bench/scheduler_replay/recordings/ holds whole networks' tunings on a Zen 4
# (about 5 minutes each, MobileNetV2's 8). Environment (defaults in brackets):
# BASE [HEAD], PER_TASK ["16 32 64"] budgets in trials per task, SEEDS [10],
# MODELS ["gnn-meta xgb"], OUT [bench/scheduler_replay/results], NAME [scheduler_replay].
set -euo pipefail
cd "$(dirname "$0")/../.."
usage() { sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; }
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then usage; exit 0; fi
pairs=("$@")
[ ${#pairs[@]} -eq 0 ] && pairs=(resnet18=data/opencl_dataset.db squeezenet1_1=data/opencl_dataset.db)
for p in "${pairs[@]}"; do
  case "$p" in
    *=*) [ -r "${p#*=}" ] || { echo "scheduler_replay: cannot read the recording ${p#*=}" >&2; exit 2; } ;;
    *) echo "scheduler_replay: '$p' is not NETWORK=DB" >&2; usage >&2; exit 2 ;;
  esac
done
BASE="${BASE:-HEAD}"
OUT="${OUT:-bench/scheduler_replay/results}"
NAME="${NAME:-scheduler_replay}"
cmd="bench/scheduler_replay/run.sh ${pairs[*]}"
for v in BASE PER_TASK SEEDS MODELS; do
  if [ -n "${!v:-}" ]; then cmd="$v=${!v@Q} $cmd"; fi
done
. bench/common/two_builds.sh
bench_base_and_head mtgpu-sched-replay "$BASE"
PYTHONPATH=bench/common exec python3 bench/scheduler_replay/report.py --base "$work/base-build/mtgpu" --head "$work/head-build/mtgpu" \
  --base-rev "$base_rev" --head-rev "$head_rev" --per-task "${PER_TASK:-16 32 64}" --seeds "${SEEDS:-10}" \
  --models "${MODELS:-gnn-meta xgb}" --out "$OUT" --name "$NAME" --command "$cmd" "${pairs[@]}"
