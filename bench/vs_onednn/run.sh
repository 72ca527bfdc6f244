#!/usr/bin/env bash
# mtgpu against oneDNN on this CPU, whole networks, every side in one window:
# for each network (tuned first where it has no database, then timed right away),
# oneDNN (blocked "any" layouts and plain NCHW), mtgpu with
# the default configs (no database) and mtgpu with the configs `mtgpu tune NET`
# found at its defaults, timed in turns, ROUNDS rounds, the order rotating each
# round; then `mtgpu run --profile` of the tuned and the default network: each
# convolution's time, GFLOP/s and fraction of the FMA peak measured in the same
# run, and the convolutions' time against the peak bound (their FLOPs / peak).
# Writes $OUT/vs_onednn.{md,json} and $OUT/vs_onednn_layers.csv
# (bench/vs_onednn/report.py).
#
#   bench/vs_onednn/run.sh            (tunes the networks that have no database yet:
#                                       up to 28 minutes each, `mtgpu tune`'s time limit)
#
# Environment (defaults in brackets):
#   NETS        networks ["resnet50 resnet18 vgg16 mobilenet_v2"]
#   ROUNDS      rounds of the four sides per network [3]
#   REPEAT      timed passes per side and round [10]
#   DB_DIR      one tuning database per network, NET.db, made by `mtgpu tune NET --db`
#               at its defaults where missing [${XDG_CACHE_HOME:-~/.cache}/mtgpu/vs_onednn]
#   TUNE=0      do not tune: a network without a database is left out
#   ONEDNN_ENV  environment of bench_onednn_net [none: OpenMP's defaults,
#               as oneDNN runs for its users; OMP_WAIT_POLICY=passive, the default before
#               2026-12-05, made its networks 1.10-2.28x slower: bench/onednn_env]
#   BUILD_DIR   build directory [build-bench]
#   OUT         where the results go [bench/vs_onednn/results]
# Exit status: 0 when every side of every network ran, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD="${BUILD_DIR:-build-bench}"
NETS="${NETS:-resnet50 resnet18 vgg16 mobilenet_v2}"
ROUNDS="${ROUNDS:-3}"
REPEAT="${REPEAT:-10}"
DB_DIR="${DB_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mtgpu/vs_onednn}"
OUT="${OUT:-bench/vs_onednn/results}"
read -r -a onednn_env <<<"${ONEDNN_ENV-}"
log() { echo "vs_onednn: $*" >&2; }

# shellcheck source=../common/network_bins.sh
. bench/common/network_bins.sh
mkdir -p "$DB_DIR" "$OUT"
work="$OUT/raw"
rm -rf "$work"
mkdir -p "$work"
status=0

side() { # NET SIDE ROUND: one timed run of one side, its JSON to $work
  local net=$1 side=$2 round=$3 f="$work/$1.$2.$3.json"
  case $side in
    onednn_any | onednn_nchw)
      env "${onednn_env[@]}" "$bin"/bench_onednn_net "$net" --layout "${side#onednn_}" --repeat "$REPEAT" --json >"$f" ;;
    default) MTGPU_DB="$work/none.db" "$bin"/mtgpu run "$net" --repeat "$REPEAT" --json >"$f" ;;
    tuned) "$bin"/mtgpu run "$net" --db "$DB_DIR/$net.db" --repeat "$REPEAT" --json >"$f" ;;
  esac
}

sides=(onednn_any onednn_nchw default tuned)
time_net() { # NET: the rounds of its four sides, then the profiles
  local net=$1
  for ((r = 0; r < ROUNDS; r++)); do
    for ((i = 0; i < ${#sides[@]}; i++)); do
      s=${sides[$(( (i + r) % ${#sides[@]} ))]}
      log "$net round $((r + 1))/$ROUNDS: $s"
      side "$net" "$s" "$r" || { log "$net: $s failed"; status=1; }
    done
  done
  log "$net: profiles (tuned, default)"
  "$bin"/mtgpu run "$net" --db "$DB_DIR/$net.db" --repeat "$REPEAT" --profile --json >"$work/$net.profile_tuned.json" || status=1
  MTGPU_DB="$work/none.db" "$bin"/mtgpu run "$net" --repeat "$REPEAT" --profile --json >"$work/$net.profile_default.json" || status=1
}

nets=()
for net in $NETS; do
  db="$DB_DIR/$net.db"
  if [ ! -s "$db" ] || [ -e "$db.tuning" ]; then
    if [ "${TUNE:-1}" = 0 ]; then
      log "$net: no database at $db and TUNE=0: left out"
      continue
    fi
    log "$net: mtgpu tune $net (defaults) into $db"
    touch "$db.tuning"
    start=$(date +%s)
    if "$bin"/mtgpu tune "$net" --db "$db" >"$DB_DIR/$net.tune.log" 2>&1; then
      echo "{\"network\": \"$net\", \"tune_wall_s\": $(( $(date +%s) - start ))}" >"$DB_DIR/$net.tune.json"
      rm -f "$db.tuning"
    else
      log "$net: mtgpu tune failed (see $DB_DIR/$net.tune.log)"
      status=1
      continue
    fi
  fi
  nets+=("$net")
  # The tuning's log (with its estimate and the refinement's in-network times) goes with the results.
  cp "$DB_DIR/$net.tune.log" "$DB_DIR/$net.tune.json" "$work/" 2>/dev/null || true
  # Timed right after its tuning: a network's sides share one window of the machine.
  time_net "$net"
done

cpu=$(PYTHONPATH=bench/common python3 -c "import benchlib; print(benchlib.cpu_model())")
python3 bench/vs_onednn/report.py --work "$work" --db-dir "$DB_DIR" --out "$OUT" --rounds "$ROUNDS" --repeat "$REPEAT" \
  --cpu "$cpu" --cores "$(nproc)" --commit "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" "${nets[@]}"
exit $status
