#!/usr/bin/env bash
# In-network refinement (`mtgpu refine`, net/refine.h) of a tuned database,
# and a check of what it chose that does not trust its own numbers.
#
#   bench/refine/run.sh DB      (about 4 minutes for ResNet-50 on the 2-core machine)
#
# DB is copied and left as it is; the copy is refined. Three measurements:
#  1. `mtgpu refine NETWORK --db COPY --json`: per workload, the device time
#     inside the network of each candidate set (the fastest records, the
#     second, ..., the defaults); winners are stored as preferences.
#  2. The same command again with --dry-run: every set timed afresh. Run 1
#     kept the minimum of several noisy times, which is biased low; run 2's
#     times of run 1's picks against its own fastest-record times are not.
#  3. `mtgpu run NETWORK` on DB and on COPY in turns, ROUNDS times each: the
#     median wall time of whole passes.
# Environment (defaults in brackets): NETWORK [resnet50], ROUNDS [4], REPEAT
# [20] passes per run, OUT [bench/refine/results] gets NAME.md and NAME.json, NAME [refine].
set -euo pipefail
cd "$(dirname "$0")/../.."
DB="${1:?usage: bench/refine/run.sh DB}"
NETWORK="${NETWORK:-resnet50}"
ROUNDS="${ROUNDS:-4}"
REPEAT="${REPEAT:-20}"
OUT="${OUT:-bench/refine/results}"
NAME="${NAME:-refine}"
. bench/common/two_builds.sh
work=$(mktemp -d /tmp/mtgpu-refine-XXXXXX)
trap 'rm -rf "$work"' EXIT
bench_release_build . "$work/build"
exe="$work/build/mtgpu"
# A consistent copy even while the source has a WAL: SQLite's own backup.
sqlite3 "$DB" ".backup '$work/orig.db'"
cp "$work/orig.db" "$work/refined.db"
"$exe" refine "$NETWORK" --db "$work/refined.db" --json >"$work/refine1.json"
"$exe" refine "$NETWORK" --db "$work/refined.db" --json --dry-run >"$work/refine2.json"
echo "refine: refined, now $ROUNDS rounds of whole passes" >&2
for round in $(seq 1 "$ROUNDS"); do
  for which in orig refined; do
    "$exe" run "$NETWORK" --db "$work/$which.db" --repeat "$REPEAT" --json >"$work/run-$which-$round.json"
  done
done
rev="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!bench/*/results/*' || echo +changes)"
python3 bench/refine/refine_report.py "$work" "$ROUNDS" "$NETWORK" "$DB" "$rev" "$OUT" "$NAME"
