#!/usr/bin/env bash
# Warm against cold measurement in `mtgpu tune`: each network tuned twice at
# the tuner's defaults, into fresh databases, once with `--measure warm` (the
# kernel run back to back, its weights left in the caches) and once with
# `--measure cold` (weights evicted from the caches before every timed run), then
# the network run with each database, with the default configs (no database)
# and oneDNN (blocked layouts) in turns, ROUNDS rounds, the order rotating each
# round: every ratio comes from one window of this shared machine. The tunings'
# logs give what the in-network refinement kept (a record, or the default).
# Writes $OUT/cold_tune.{md,json} (bench/cold_tune/report.py).
#
#   bench/cold_tune/run.sh
#
# Environment (defaults in brackets):
#   NETS      networks ["resnet50 mobilenet_v2"]
#   ROUNDS    rounds of the four sides per network [5]
#   REPEAT    timed passes per side and round [10]
#   DB_DIR    NET.warm.db and NET.cold.db, tuned where missing
#             [${XDG_CACHE_HOME:-~/.cache}/mtgpu/cold_tune]
#   BUILD_DIR build directory [build-bench]
#   OUT       where the results go [bench/cold_tune/results]
# Exit status: 0 when every tuning and every side ran, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD="${BUILD_DIR:-build-bench}"
NETS="${NETS:-resnet50 mobilenet_v2}"
ROUNDS="${ROUNDS:-5}"
REPEAT="${REPEAT:-10}"
DB_DIR="${DB_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mtgpu/cold_tune}"
OUT="${OUT:-bench/cold_tune/results}"
log() { echo "cold_tune: $*" >&2; }

# shellcheck source=../common/network_bins.sh
. bench/common/network_bins.sh
mkdir -p "$DB_DIR" "$OUT"
work="$OUT/raw"
rm -rf "$work"
mkdir -p "$work"
status=0

tune() { # NET MODE: the tuning into NET.MODE.db, its log and wall time beside it
  local net=$1 mode=$2 db="$DB_DIR/$1.$2.db"
  if [ -s "$db" ] && [ ! -e "$db.tuning" ]; then return 0; fi
  rm -f "$db" "$db-wal" "$db-shm"
  log "$net: mtgpu tune $net --measure $mode"
  touch "$db.tuning"
  local start
  start=$(date +%s)
  if "$bin"/mtgpu tune "$net" --measure "$mode" --db "$db" >"$DB_DIR/$net.$mode.tune.log" 2>&1; then
    echo "{\"network\": \"$net\", \"measure\": \"$mode\", \"tune_wall_s\": $(($(date +%s) - start))}" >"$DB_DIR/$net.$mode.tune.json"
    rm -f "$db.tuning"
  else
    log "$net: mtgpu tune --measure $mode failed (see $DB_DIR/$net.$mode.tune.log)"
    return 1
  fi
}

side() { # NET SIDE ROUND: one timed run of one side, its JSON to $work
  local net=$1 side=$2 round=$3 f="$work/$1.$2.$3.json"
  case $side in
    onednn_any) "$bin"/bench_onednn_net "$net" --layout any --repeat "$REPEAT" --json >"$f" ;;
    default) MTGPU_DB="$work/none.db" "$bin"/mtgpu run "$net" --repeat "$REPEAT" --json >"$f" ;;
    warm | cold) "$bin"/mtgpu run "$net" --db "$DB_DIR/$net.$side.db" --repeat "$REPEAT" --json >"$f" ;;
  esac
}

sides=(onednn_any default warm cold)
nets=()
for net in $NETS; do
  tune "$net" warm && tune "$net" cold || { status=1; continue; }
  cp "$DB_DIR/$net".{warm,cold}.tune.{log,json} "$work/"
  nets+=("$net")
  for ((r = 0; r < ROUNDS; r++)); do
    for ((i = 0; i < ${#sides[@]}; i++)); do
      s=${sides[$(((i + r) % ${#sides[@]}))]}
      log "$net round $((r + 1))/$ROUNDS: $s"
      side "$net" "$s" "$r" || { log "$net: $s failed"; status=1; }
    done
  done
done

cpu=$(PYTHONPATH=bench/common python3 -c "import benchlib; print(benchlib.cpu_model())")
python3 bench/cold_tune/report.py --work "$work" --out "$OUT" --rounds "$ROUNDS" --repeat "$REPEAT" \
  --cpu "$cpu" --cores "$(nproc)" --commit "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" "${nets[@]}"
exit $status
