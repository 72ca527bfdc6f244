#!/usr/bin/env bash
# Does the refinement's whole-pass check (net/refine.h) keep a tuned network
# from running slower than its default configs? A tuned database (its
# preferences as an earlier refinement stored them) is copied twice: one copy
# stays as it is (`before`), the other is refined again by this tree's
# `mtgpu refine NETWORK` (`after`, which checks its choice in whole passes
# against the fastest records and the defaults). Then three sides run the
# whole network in turns, ROUNDS rounds, the order rotating: the default
# configs (no database), `before` and `after`, each `mtgpu run NETWORK
# --repeat REPEAT --json`. Ratios are taken within a round (one window of the
# machine). Writes $OUT/$NAME.md and .json (bench/refine_check/report.py),
# the runs' JSON under $OUT/raw/$NAME.
#
#   bench/refine_check/run.sh DB      (VGG-16: about 3 minutes on the 2-core machine)
#
# DB: a database `mtgpu tune NETWORK --db DB` made (e.g. one of
# bench/vs_onednn's); it is copied and left as it is.
# Environment (defaults in brackets): NETWORK [resnet50], ROUNDS [8],
# REPEAT [10] passes per run, BUILD_DIR [build-bench],
# OUT [bench/refine_check/results], NAME [NETWORK].
set -euo pipefail
cd "$(dirname "$0")/../.."
usage() { sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; }
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then usage; exit 0; fi
if [ $# -ne 1 ]; then usage >&2; exit 2; fi
DB="$1"
[ -s "$DB" ] || { echo "refine_check: no database $DB" >&2; exit 2; }
NETWORK="${NETWORK:-resnet50}"
ROUNDS="${ROUNDS:-8}"
REPEAT="${REPEAT:-10}"
BUILD="${BUILD_DIR:-build-bench}"
OUT="${OUT:-bench/refine_check/results}"
NAME="${NAME:-$NETWORK}"
log() { echo "refine_check: $*" >&2; }

# shellcheck source=../common/network_bins.sh
. bench/common/network_bins.sh
mtgpu="$bin/mtgpu"
work="$bin/work"
raw="$OUT/raw/$NAME"
rm -rf "$raw"
mkdir -p "$work" "$raw"
for side in before after; do
  python3 -c "import sys; sys.path.insert(0, 'bench/common'); import benchlib; benchlib.snapshot(sys.argv[1], sys.argv[2])" "$DB" "$work/$side.db"
done
log "$NETWORK: refining a copy of $DB"
"$mtgpu" refine "$NETWORK" --db "$work/after.db" --json >"$raw/refine.json" 2>"$work/refine.log" ||
  { log "mtgpu refine failed:"; tail "$work/refine.log" >&2; exit 1; }

sides=(default before after)
for ((r = 0; r < ROUNDS; r++)); do
  for ((i = 0; i < ${#sides[@]}; i++)); do
    s=${sides[$(((i + r) % ${#sides[@]}))]}
    log "round $((r + 1))/$ROUNDS: $s"
    case $s in
      default) MTGPU_DB="$work/none.db" "$mtgpu" run "$NETWORK" --repeat "$REPEAT" --json ;;
      *) "$mtgpu" run "$NETWORK" --db "$work/$s.db" --repeat "$REPEAT" --json ;;
    esac >"$raw/$NETWORK.$s.$r.json" || { log "mtgpu run with $s failed"; exit 1; }
  done
done

python3 bench/refine_check/report.py --raw "$raw" --out "$OUT/$NAME" --network "$NETWORK" --rounds "$ROUNDS" --repeat "$REPEAT" \
  --cpu "$(PYTHONPATH=bench/common python3 -c 'import benchlib; print(benchlib.cpu_model())')" --cores "$(nproc)" \
  --commit "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
  --command "NETWORK=$NETWORK ROUNDS=$ROUNDS bench/refine_check/run.sh $DB"
