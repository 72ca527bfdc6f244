#!/usr/bin/env bash
# Where a network's pass spends the time between its kernels, from PoCL's
# own event trace: `mtgpu run NETWORK` with POCL_TRACING=text, which logs
# when each command was queued, submitted (its dependencies done), started
# running and completed; per pass the kernels' running time, the gaps from
# one kernel's completion to the next one's start and the wait from
# submission to start. The same runs without tracing, in turns, say what
# the trace itself costs. Writes $OUT/$NAME.md and .json
# (bench/launch_gaps/report.py). PoCL only (other drivers ignore the variables).
#
#   bench/launch_gaps/run.sh [DB]   (MobileNetV2, 3 rounds: under a minute)
#
# Environment (defaults in brackets): NETWORK [mobilenet_v2], ROUNDS [3],
# REPEAT [20] passes per run, RUN_ARGS more arguments of `mtgpu run` (e.g.
# --no-fuse: every kernel its own launch) [none], BUILD_DIR [build-bench],
# OUT [bench/launch_gaps/results], NAME [NETWORK].
set -euo pipefail
cd "$(dirname "$0")/../.."
usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; }
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then usage; exit 0; fi
if [ $# -gt 1 ]; then usage >&2; exit 2; fi
DB="${1:-}"
NETWORK="${NETWORK:-mobilenet_v2}"
ROUNDS="${ROUNDS:-3}"
REPEAT="${REPEAT:-20}"
OUT="${OUT:-bench/launch_gaps/results}"
NAME="${NAME:-$NETWORK}"
BUILD="${BUILD_DIR:-build-bench}"
read -r -a run_args <<<"${RUN_ARGS:-}"
log() { echo "launch_gaps: $*" >&2; }
[ -z "$DB" ] || [ -f "$DB" ] || { log "no database $DB"; exit 2; }

# shellcheck source=../common/network_bins.sh
. bench/common/network_bins.sh
raw="$OUT/raw/$NAME"
network_db_and_raw "$DB"

for ((r = 0; r < ROUNDS; r++)); do
  for ((i = 0; i < 2; i++)); do
    side=$(((i + r) % 2))
    log "round $((r + 1))/$ROUNDS: $([ $side = 1 ] && echo traced || echo untraced)"
    if [ $side = 1 ]; then
      # The trace goes to POCL_TRACING_OPT; it is kept out of the results (large).
      env POCL_TRACING=text POCL_TRACING_OPT="$bin/trace-$r.txt" \
        "$bin/mtgpu" run "$NETWORK" ${dbargs[@]+"${dbargs[@]}"} ${run_args[@]+"${run_args[@]}"} --repeat "$REPEAT" --json >"$raw/traced-$r.json"
      python3 bench/launch_gaps/report.py --summarise "$bin/trace-$r.txt" --launches-from "$raw/traced-$r.json" \
        --passes "$REPEAT" >"$raw/gaps-$r.json"
    else
      env -u POCL_TRACING "$bin/mtgpu" run "$NETWORK" ${dbargs[@]+"${dbargs[@]}"} ${run_args[@]+"${run_args[@]}"} --repeat "$REPEAT" --json >"$raw/untraced-$r.json"
    fi
  done
done

python3 bench/launch_gaps/report.py --raw "$raw" --out "$OUT/$NAME" --network "$NETWORK" --db "${DB:-none (default configs)}" \
  --rounds "$ROUNDS" --repeat "$REPEAT" --cpu "$(PYTHONPATH=bench/common python3 -c 'import benchlib; print(benchlib.cpu_model())')" \
  --cores "$(nproc)" --commit "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
  --command "NETWORK=$NETWORK ROUNDS=$ROUNDS${RUN_ARGS:+ RUN_ARGS=\"$RUN_ARGS\"} bench/launch_gaps/run.sh${DB:+ $DB}"
