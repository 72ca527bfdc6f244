#!/usr/bin/env bash
# End-to-end benchmark: for each network and each cost model, tune
# the network with the same trial budget on a fresh records database, then
# run the whole network with the tuned kernels (`mtgpu run`): inference
# latency, tuning wall time and the executor's peak device memory against the
# goal's bound (weights + the two largest activations + kernel workspace).
# Each network also gets a row with default configs (an empty database), and
# the same network with the same weights through oneDNN on the CPU
# (bench_onednn_net: blocked "any" layouts and plain NCHW), whose output is
# first checked against the CPU reference at 32x32. Writes
# $OUT/e2e.md, $OUT/e2e.json and $OUT/e2e.png (bench/e2e/e2e_report.py).
#
#   bench/e2e/run.sh                 (hours: 4 networks x 3 cost models; resumable)
#
# Environment (defaults in brackets):
#   NETS            networks ["resnet18 resnet50 vgg16 mobilenet_v2"]
#   MODELS          cost models ["random xgb gnn"]; also gnn-shared, mlp
#   TRIALS          `mtgpu tune --trials`, the same for every network and model [160]
#   TIME_LIMIT      `mtgpu tune --time-limit` in seconds [2700]; a safety net: a run
#                   that reaches it did fewer trials, and the table says so
#   REPEAT          timed passes of `mtgpu run` [20]
#   ONEDNN_REPEAT   timed passes of bench_onednn_net [20]
#   ONEDNN_ENV      environment of bench_onednn_net [none: OpenMP's defaults, as oneDNN
#                   runs for its users]. OMP_WAIT_POLICY=passive, the default before
#                   2026-12-05 (OpenMP's spin-waiting had made oneDNN erratic on a loaded
#                   machine), made its networks 1.10-2.28x slower on a quiet one: bench/onednn_env.
#                   Threads: all cores (OMP_NUM_THREADS unset) unless set here or outside
#   DEVICE          `--device` for mtgpu tune and run [the first device]
#   MTGPU_TUNE_ARGS extra arguments for `mtgpu tune` (word-split)
#   OUT             where e2e.{md,json,png} go [bench/e2e/results]
#   WORK            one JSON per finished (network, model) and per oneDNN run [$OUT/e2e]
#   DB_DIR          the tuning databases and logs [${XDG_CACHE_HOME:-~/.cache}/mtgpu/e2e]
#   BUILD_DIR       build directory, relative to the repository root [build-bench]
#   JOBS            parallel build jobs [nproc]
#   PYTHON          a python3 with matplotlib for the plot [python3, else /usr/bin/python3]
#   REMEASURE=1     tune nothing: for every finished pair (its database still in DB_DIR)
#                   measure `mtgpu run` again, and oneDNN and the default configs too,
#                   all back to back, so that the latencies of one table come from one
#                   window of the (shared) machine; the tuning figures are kept
#   FORCE=1         redo results that already exist (default: keep them, so an
#                   interrupted run resumes with the next unfinished pair)
#   WARM_CACHE=1    tune with the user's compiled-kernel caches; by default each
#                   tuning run starts with empty ones (mtgpu's and PoCL's), as a
#                   first run does, so that no model profits from another's compiles
#
# A pair whose tuning was interrupted is started again on a fresh database
# (its wall time would not be comparable otherwise); finished pairs are kept.
# Exit status: 0 when every pair and reference ran, 1 otherwise (the report
# is still written from what finished).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD="${BUILD_DIR:-build-bench}"
NETS="${NETS:-resnet18 resnet50 vgg16 mobilenet_v2}"
MODELS="${MODELS:-random xgb gnn}"
TRIALS="${TRIALS:-160}"
TIME_LIMIT="${TIME_LIMIT:-2700}"
REPEAT="${REPEAT:-20}"
ONEDNN_REPEAT="${ONEDNN_REPEAT:-20}"
OUT="${OUT:-bench/e2e/results}"
WORK="${WORK:-$OUT/e2e}"
DB_DIR="${DB_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mtgpu/e2e}"
FORCE="${FORCE:-0}"
read -r -a onednn_env <<<"${ONEDNN_ENV-}"

cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DMTGPU_TESTS=OFF >/dev/null
cmake --build "$BUILD" -j"${JOBS:-$(nproc)}" --target mtgpu_cli mtgpu_worker >/dev/null
have_dnnl=0
if ! grep -qE '^DNNL_(LIBRARY|INCLUDE_DIR):[A-Z]+=.*NOTFOUND' "$BUILD/CMakeCache.txt"; then
  cmake --build "$BUILD" -j"${JOBS:-$(nproc)}" --target bench_onednn_net >/dev/null
  have_dnnl=1
else
  echo "e2e: oneDNN not found (bench/common/setup.sh installs it): no oneDNN reference" >&2
fi
mkdir -p "$OUT" "$WORK" "$DB_DIR"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/mtgpu-e2e.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
read -r -a tune_args <<<"${MTGPU_TUNE_ARGS:-}"
dev_args=()
if [ -n "${DEVICE:-}" ]; then dev_args=(--device "$DEVICE"); fi
failed=0

log() { echo "e2e: $*" >&2; }

# Runs "$@" with fresh, empty kernel caches under $1 (unless WARM_CACHE=1).
with_caches() {
  local dir="$1"
  shift
  if [ "${WARM_CACHE:-0}" = 1 ]; then "$@"; else MTGPU_CACHE_DIR="$dir/kernels" POCL_CACHE_DIR="$dir/pocl" "$@"; fi
}

# The last line of a file that is a JSON object (mtgpu's --json output ends with one).
last_json() { grep '^{' "$1" | tail -n 1; }

# pair_done FILE: the result exists and FORCE is off.
pair_done() { [ "$FORCE" != 1 ] && [ -s "$1" ]; }

REMEASURE="${REMEASURE:-0}"
if [ "$REMEASURE" = 1 ]; then FORCE=1; fi

for net in $NETS; do
  mkdir -p "$WORK/$net"

  # The oneDNN reference: the output checked against mt_network_reference, then the latency.
  if [ "$have_dnnl" -eq 1 ]; then
    res="$WORK/$net/onednn_check.json"
    if ! pair_done "$res"; then
      log "$net: bench_onednn_net --check --image-size 32"
      if env "${onednn_env[@]}" "$BUILD"/bench_onednn_net "$net" --check --image-size 32 --json >"$tmp/check.json"; then
        mv "$tmp/check.json" "$res"
      else
        log "$net: the oneDNN network does not match the reference (or failed): $(cat "$tmp/check.json")"
        # Keep the failed check: the report shows it.
        mv "$tmp/check.json" "$res" || true
        failed=1
      fi
    fi
    for layout in any nchw; do
      res="$WORK/$net/onednn_$layout.json"
      pair_done "$res" && continue
      log "$net: bench_onednn_net --layout $layout --repeat $ONEDNN_REPEAT"
      if env "${onednn_env[@]}" "$BUILD"/bench_onednn_net "$net" --layout "$layout" --repeat "$ONEDNN_REPEAT" --json >"$tmp/onednn.json"; then
        mv "$tmp/onednn.json" "$res"
      else
        log "$net: bench_onednn_net --layout $layout failed"
        failed=1
      fi
    done
  fi

  # Default configs: no database.
  res="$WORK/$net/default.json"
  if ! pair_done "$res"; then
    log "$net: mtgpu run (default configs, no database)"
    mkdir -p "$tmp/default"
    if with_caches "$tmp/default" env MTGPU_DB="$tmp/default/none.db" "$BUILD"/mtgpu run "$net" "${dev_args[@]}" --repeat "$REPEAT" --json \
      >"$tmp/run.out"; then
      NET="$net" RUN="$(last_json "$tmp/run.out")" python3 -c '
import json, os
print(json.dumps({"network": os.environ["NET"], "cost_model": "default", "run": json.loads(os.environ["RUN"])}, indent=1))' >"$tmp/pair.json"
      mv "$tmp/pair.json" "$res"
    else
      log "$net: mtgpu run with default configs failed"
      failed=1
    fi
    rm -rf "$tmp/default"
  fi

  for model in $MODELS; do
    res="$WORK/$net/$model.json"
    if [ "$REMEASURE" = 1 ]; then
      db="$DB_DIR/$net-$model.db"
      if [ ! -s "$res" ] || [ ! -s "$db" ]; then log "$net/$model: no finished pair to measure again"; continue; fi
      log "$net/$model: mtgpu run $net --db $db --repeat $REPEAT (measured again)"
      if with_caches "$tmp/re-$net-$model" "$BUILD"/mtgpu run "$net" --db "$db" "${dev_args[@]}" --repeat "$REPEAT" --json >"$tmp/run.out"; then
        RES="$res" RUN="$(last_json "$tmp/run.out")" python3 -c '
import json, os, time
r = json.load(open(os.environ["RES"]))
r["run"] = json.loads(os.environ["RUN"])
r["run_remeasured"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
print(json.dumps(r, indent=1))' >"$tmp/pair.json" && mv "$tmp/pair.json" "$res"
      else
        log "$net/$model: mtgpu run failed"
        failed=1
      fi
      rm -rf "$tmp/re-$net-$model"
      continue
    fi
    pair_done "$res" && continue
    db="$DB_DIR/$net-$model.db"
    rm -f "$db" "$db-wal" "$db-shm" # a fresh database, also after an interrupted run
    caches="$tmp/caches-$net-$model"
    mkdir -p "$caches"
    logf="$DB_DIR/$net-$model.tune.jsonl"
    log "$net/$model: mtgpu tune $net --trials $TRIALS --cost-model $model --time-limit $TIME_LIMIT --db $db ${MTGPU_TUNE_ARGS:-}"
    t0=$(date +%s.%N)
    tune_rc=0
    with_caches "$caches" "$BUILD"/mtgpu tune "$net" --trials "$TRIALS" --cost-model "$model" --time-limit "$TIME_LIMIT" --db "$db" \
      "${dev_args[@]}" --json "${tune_args[@]}" >"$logf" || tune_rc=$?
    t1=$(date +%s.%N)
    if [ "$tune_rc" -ne 0 ] || ! grep -q '"type": "summary"' "$logf"; then
      log "$net/$model: mtgpu tune failed (exit $tune_rc; log $logf)"
      failed=1
      rm -rf "$caches"
      continue
    fi
    if grep '"type": "summary"' "$logf" | grep -q '"interrupted": true'; then
      # Ctrl-C: mtgpu tune stops cleanly and so does this script; the pair is redone next time.
      log "$net/$model: tuning interrupted; not kept (rerun to redo this pair from a fresh database)"
      rm -rf "$caches"
      exit 130
    fi
    log "$net/$model: mtgpu run $net --db $db --repeat $REPEAT"
    if ! with_caches "$caches" "$BUILD"/mtgpu run "$net" --db "$db" "${dev_args[@]}" --repeat "$REPEAT" --json >"$tmp/run.out"; then
      log "$net/$model: mtgpu run failed"
      failed=1
      rm -rf "$caches"
      continue
    fi
    rm -rf "$caches"
    NET="$net" MODEL="$model" TRIALS="$TRIALS" TIME_LIMIT="$TIME_LIMIT" T0="$t0" T1="$t1" LOG="$logf" RUN="$(last_json "$tmp/run.out")" \
      TUNE_ARGS="${MTGPU_TUNE_ARGS:-}" CACHE="$([ "${WARM_CACHE:-0}" = 1 ] && echo warm || echo cold)" python3 -c '
import json, os
env = os.environ
summary, refine, records, errors = None, None, 0, 0
with open(env["LOG"]) as f:
    for line in f:
        if not line.startswith("{"):
            continue
        obj = json.loads(line)
        if obj.get("type") == "summary":
            summary = obj
        elif obj.get("type") == "refine":
            refine = {k: obj[k] for k in ("sets", "passes", "fastest_ms", "chosen_ms", "stored", "removed", "wall_s")}
        elif obj.get("type") == "record":
            records += 1
            errors += obj.get("status") != "ok"
print(json.dumps({"network": env["NET"], "cost_model": env["MODEL"], "trials": int(env["TRIALS"]), "time_limit_s": int(env["TIME_LIMIT"]),
                  "tune_args": env["TUNE_ARGS"], "kernel_caches": env["CACHE"],
                  "tune_process_wall_s": float(env["T1"]) - float(env["T0"]), "measurements": records, "failed_measurements": errors,
                  "tune": summary, "refine": refine, "run": json.loads(env["RUN"])}, indent=1))' >"$tmp/pair.json"
    mv "$tmp/pair.json" "$res"
    log "$net/$model: done ($(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("%.0f s tuning, %.2f ms" % (r["tune"]["wall_s"], r["run"]["median_ms"]))' "$res"))"
  done
done

# The report, also after failures, from whatever finished; the plot needs a python3 with matplotlib.
py=python3
for cand in "${PYTHON:-}" python3 /usr/bin/python3; do
  if [ -n "$cand" ] && "$cand" -c 'import matplotlib' 2>/dev/null; then py="$cand"; break; fi
done
# shellcheck disable=SC2086
"$py" bench/e2e/e2e_report.py --work "$WORK" --out "$OUT" --nets $NETS --models $MODELS || failed=1
exit "$failed"
