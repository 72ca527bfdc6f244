#!/usr/bin/env bash
# Cost-model accuracy on held-out workloads: the modular GNN (gnn),
# the same GNN with one shared module (gnn-shared), an MLP on pooled node
# features (mlp), XGBoost on loop features (xgb) and random scores, each
# fitted on a share of the training records of a measured data set and
# scored on workloads it never saw (`mtgpu eval-model`). Writes
# $OUT/cm_accuracy.md (model x share table: mean and min-max over the splits,
# parameters, and a paragraph that says from the numbers whether the modular
# GNN beats the others and whether its lead grows as the share shrinks),
# $OUT/cm_accuracy.csv (one row per run) and $OUT/cm_accuracy.png (with
# matplotlib). bench/cm_accuracy/cm_accuracy.py does the snapshot, the splits and the report.
#
#   bench/cm_accuracy/run.sh [DB]      (default data/opencl_dataset.db, e.g. from bench/dataset/run.sh)
#
# The database is first copied to a snapshot (SQLite's online backup), so a
# data set that a tuner is still writing gives every run the same records.
# Splits are by workload: K-fold with K = round(1 / HOLDOUT_FRAC), split s
# holds out fold s; every model and share of one split sees the same
# held-out records (passed to eval-model as --holdout), every model of one
# (split, share) the same training records (--train-frac, --seed s), so the
# comparison is paired.
#
# Environment (defaults in brackets):
#   MODELS        cost models ["gnn gnn-shared mlp xgb random"]
#   FRACS         shares of the training records ["0.1 0.3 1.0"]
#   SEEDS         number of held-out splits [3]; split s uses --seed s
#   HOLDOUT_FRAC  share of the workloads held out per split [0.25]
#   DEVICE        only records of the device with this fingerprint [all]
#   TIME_LIMIT    seconds; no run starts after it, the report covers what ran [0: none]
#   OUT           where cm_accuracy.{md,csv,png} go [bench/cm_accuracy/results]
#   BUILD_DIR     build directory, relative to the repository root [build-bench]
#   JOBS          parallel build jobs [nproc]
#   PYTHON        a python3 with matplotlib for the plot [python3, else /usr/bin/python3]
#
# Runtime: seconds per run on a few hundred records; the fit of gnn grows
# with the records (30 epochs), so a full 40-workload set takes minutes per
# gnn run on 2 cores. Exit status: 0 when every run succeeded, 1 otherwise
# (the report is still written from what ran).
set -euo pipefail
cd "$(dirname "$0")/../.."
DB="${1:-data/opencl_dataset.db}"
BUILD="${BUILD_DIR:-build-bench}"
MODELS="${MODELS:-gnn gnn-shared mlp xgb random}"
FRACS="${FRACS:-0.1 0.3 1.0}"
SEEDS="${SEEDS:-3}"
HOLDOUT_FRAC="${HOLDOUT_FRAC:-0.25}"
TIME_LIMIT="${TIME_LIMIT:-0}"
OUT="${OUT:-bench/cm_accuracy/results}"

# The command as given, with the settings that differ from the defaults, for the report.
cmd=""
for v in MODELS FRACS SEEDS HOLDOUT_FRAC DEVICE TIME_LIMIT; do
  case "$v:${!v:-}" in
    "MODELS:gnn gnn-shared mlp xgb random" | "FRACS:0.1 0.3 1.0" | SEEDS:3 | HOLDOUT_FRAC:0.25 | TIME_LIMIT:0 | DEVICE:) ;;
    *) cmd+="$v=${!v@Q} " ;;
  esac
done
cmd+="bench/cm_accuracy/run.sh $DB"

py=python3
for cand in "${PYTHON:-}" python3 /usr/bin/python3; do
  if [ -n "$cand" ] && "$cand" -c 'import matplotlib' 2>/dev/null; then py="$cand"; break; fi
done

cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DMTGPU_TESTS=OFF >/dev/null
cmake --build "$BUILD" -j"${JOBS:-$(nproc)}" --target mtgpu_cli >/dev/null
mkdir -p "$OUT"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/mtgpu-cm-acc.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
log() { echo "cm_accuracy: $*" >&2; }

dev_args=()
if [ -n "${DEVICE:-}" ]; then dev_args=(--device "$DEVICE"); fi
"$py" bench/cm_accuracy/cm_accuracy.py prepare "$DB" "$tmp/snapshot.db" --splits "$SEEDS" --holdout-frac "$HOLDOUT_FRAC" "${dev_args[@]}" \
  >"$tmp/splits.json"
log "$(sqlite3 "file:$tmp/snapshot.db?mode=ro" 'select count(*) from records' 2>/dev/null || echo '?') records of $DB;" \
  "$SEEDS splits x {$FRACS} x {$MODELS}"

start=$(date +%s)
failed=0
stopped=()
: >"$tmp/runs.jsonl"
for split in $(seq 1 "$SEEDS"); do
  holdout="$("$py" -c 'import json, sys; print(";".join(next(s for s in json.load(open(sys.argv[1]))["splits"] if s["split"] == int(sys.argv[2]))["held_out"]))' \
    "$tmp/splits.json" "$split")"
  for frac in $FRACS; do
    for model in $MODELS; do
      if [ "$TIME_LIMIT" -gt 0 ] && [ $(($(date +%s) - start)) -ge "$TIME_LIMIT" ]; then
        stopped=(--stopped-early)
        break 3
      fi
      t0=$(date +%s.%N)
      rc=0
      "$BUILD"/mtgpu eval-model --db "$tmp/snapshot.db" --cost-model "$model" --holdout "$holdout" --train-frac "$frac" \
        --seed "$split" "${dev_args[@]}" --json >"$tmp/run.out" 2>"$tmp/run.err" || rc=$?
      t1=$(date +%s.%N)
      SPLIT="$split" MODEL="$model" FRAC="$frac" RC="$rc" T0="$t0" T1="$t1" "$py" -c '
import json, os, sys
e = os.environ
obj = {}
lines = [l for l in open(sys.argv[1]) if l.startswith("{")]
if e["RC"] == "0" and lines:
    obj = json.loads(lines[-1])
    obj["status"] = "ok"
else:
    err = open(sys.argv[2]).read().strip().splitlines()
    obj = {"status": "failed", "error": "exit %s: %s" % (e["RC"], err[-1] if err else "")}
obj.update({"split": int(e["SPLIT"]), "seed": int(e["SPLIT"]), "model": e["MODEL"], "train_frac": float(e["FRAC"]),
            "wall_s": round(float(e["T1"]) - float(e["T0"]), 3)})
print(json.dumps(obj))' "$tmp/run.out" "$tmp/run.err" >>"$tmp/runs.jsonl"
      if [ "$rc" -ne 0 ]; then
        log "split $split, $model, share $frac: eval-model failed (exit $rc): $(tail -n 1 "$tmp/run.err")"
        failed=1
      else
        log "split $split, share $frac, $model: $(tail -n 1 "$tmp/runs.jsonl" | "$py" -c 'import json, sys; r = json.load(sys.stdin); print("pairwise %.3f, spearman %.3f, top-1 %.3f, fit %.1f s" % (r["pairwise_acc"], r["spearman"], r["top1"], r["train_s"]))')"
      fi
    done
  done
done
if [ "${#stopped[@]}" -gt 0 ]; then log "time limit ($TIME_LIMIT s) reached: the report covers the runs done"; fi

"$py" bench/cm_accuracy/cm_accuracy.py report --runs "$tmp/runs.jsonl" --splits "$tmp/splits.json" --snapshot "$tmp/snapshot.db" --source "$DB" \
  --command "$cmd" --out "$OUT" --wall-s $(($(date +%s) - start)) "${stopped[@]}" || failed=1
log "wrote $OUT/cm_accuracy.md, $OUT/cm_accuracy.csv$([ -f "$OUT/cm_accuracy.png" ] && echo ", $OUT/cm_accuracy.png")"
exit "$failed"
