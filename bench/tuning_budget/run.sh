#!/usr/bin/env bash
# Does a larger tuning budget make tuning matter? A network tuned at
# `mtgpu tune`'s defaults (32 measurements per task, then the in-network
# refinement) is tuned on, in a copy of its database, to PER_TASK
# measurements per task (the tuner resumes: measured configs count towards
# --trials; the refinement runs again at the end). Then three sides run the
# whole network in turns, ROUNDS rounds, the order rotating: the default
# configs (no database), the database as it was and the copy tuned on, each
# `mtgpu run NETWORK --profile` (the pass time and each layer's device time).
# The records add what the tuner itself measured: per task, the default
# config's cold time against the fastest cold record, at either budget.
# Writes $OUT/$NAME.md and .json (bench/tuning_budget/report.py), the runs'
# JSON under $OUT/raw/$NAME; the two databases and the tuning's log stay in
# $CACHE ([${XDG_CACHE_HOME:-~/.cache}/mtgpu/tuning_budget/NAME]).
#
#   bench/tuning_budget/run.sh DB    (ResNet-50 at PER_TASK=160: about 25 minutes of
#                                     tuning on the 2-core machine, then 3-4 of runs)
#
# DB: a database `mtgpu tune NETWORK --db DB` made at its defaults (e.g. one of
# bench/vs_onednn's); it is copied and left as it is. A missing DB is tuned first.
# Environment (defaults in brackets): NETWORK [resnet50], PER_TASK [160],
# ROUNDS [4], REPEAT [10] passes per run, BUILD_DIR [build-bench],
# OUT [bench/tuning_budget/results], NAME [NETWORK], TEMPLATES [every
# template: the tuning on passes --templates TEMPLATES, e.g. wino alone where
# the defaults and the tuned records of every 3x3 layer are wino and the
# question is what that template's space holds beyond its default].
set -euo pipefail
cd "$(dirname "$0")/../.."
usage() { sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; }
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then usage; exit 0; fi
if [ $# -ne 1 ]; then usage >&2; exit 2; fi
DB="$1"
NETWORK="${NETWORK:-resnet50}"
PER_TASK="${PER_TASK:-160}"
ROUNDS="${ROUNDS:-4}"
REPEAT="${REPEAT:-10}"
BUILD="${BUILD_DIR:-build-bench}"
OUT="${OUT:-bench/tuning_budget/results}"
NAME="${NAME:-$NETWORK}"
log() { echo "tuning_budget: $*" >&2; }
case $PER_TASK in '' | *[!0-9]*) log "PER_TASK must be a whole number, not '$PER_TASK'"; exit 2 ;; esac

# shellcheck source=../common/network_bins.sh
. bench/common/network_bins.sh
mtgpu="$bin/mtgpu"
work="${CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mtgpu/tuning_budget/$NAME}"
raw="$OUT/raw/$NAME"
rm -rf "$work" "$raw"
mkdir -p "$work" "$raw"

if [ ! -s "$DB" ]; then
  log "no database at $DB: mtgpu tune $NETWORK at its defaults into it"
  "$mtgpu" tune "$NETWORK" --db "$DB" >"$work/tune_base.log" 2>&1 || { log "tuning failed:"; tail "$work/tune_base.log" >&2; exit 1; }
fi
python3 -c "import sys; sys.path.insert(0, 'bench/common'); import benchlib; benchlib.snapshot(sys.argv[1], sys.argv[2])" "$DB" "$work/base.db"
cp "$work/base.db" "$work/more.db"

tasks=$("$mtgpu" tasks "$NETWORK" --json | grep -c '"workload"')
log "$NETWORK: $tasks tasks; tuning on to $PER_TASK measurements per task ($((tasks * PER_TASK)) in all)"
start=$(date +%s)
"$mtgpu" tune "$NETWORK" --db "$work/more.db" --trials $((tasks * PER_TASK)) --time-limit 0 \
  ${TEMPLATES:+--templates "$TEMPLATES"} --json >"$work/tune_more.json" 2>"$work/tune_more.log" ||
  { log "tuning on failed:"; tail "$work/tune_more.log" >&2; exit 1; }
tune_s=$(($(date +%s) - start))

side() { # SIDE ROUND
  case $1 in
    default) MTGPU_DB="$work/none.db" "$mtgpu" run "$NETWORK" --repeat "$REPEAT" --profile --json ;;
    *) "$mtgpu" run "$NETWORK" --db "$work/$1.db" --repeat "$REPEAT" --profile --json ;;
  esac >"$raw/run-$1-$2.json"
}
sides=(default base more)
for ((r = 0; r < ROUNDS; r++)); do
  for ((i = 0; i < ${#sides[@]}; i++)); do
    s=${sides[$(((i + r) % ${#sides[@]}))]}
    log "round $((r + 1))/$ROUNDS: $s"
    side "$s" "$r" || { log "mtgpu run with $s failed"; exit 1; }
  done
done
MTGPU_DB="$work/none.db" "$mtgpu" best "$NETWORK" --json >"$raw/best-default.json"
for s in base more; do "$mtgpu" best "$NETWORK" --db "$work/$s.db" --json >"$raw/best-$s.json"; done
tail -n 2 "$work/tune_more.json" >"$raw/tune_more_summary.json"

python3 bench/tuning_budget/report.py --work "$work" --raw "$raw" --out "$OUT/$NAME" --network "$NETWORK" --db "$DB" \
  --per-task "$PER_TASK" --tasks "$tasks" --tune-s "$tune_s" --rounds "$ROUNDS" --repeat "$REPEAT" \
  --cpu "$(PYTHONPATH=bench/common python3 -c 'import benchlib; print(benchlib.cpu_model())')" --cores "$(nproc)" \
  --commit "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
  --templates "${TEMPLATES:-every template}" \
  --command "NETWORK=$NETWORK PER_TASK=$PER_TASK ROUNDS=$ROUNDS ${TEMPLATES:+TEMPLATES=$TEMPLATES }bench/tuning_budget/run.sh $DB"
