#!/usr/bin/env bash
# Configs of one convolution side by side inside the network: for each
# config, a copy of a tuning database in which the workload's fastest record
# is rewritten to that config (and its in-network preference dropped), so
# that `mtgpu run NETWORK` runs it at every layer of that workload; then
# `mtgpu run NETWORK --profile` with each copy in turns, ROUNDS rounds, the
# order rotating each round. A kernel timed alone finds its weights, input
# and output in other states than inside the network (the stem of ResNet-50
# ran its 4 x 4 and 2 x 7 tiles alike alone, 0.72-0.73 ms, and 0.83 against
# 1.08 inside it), so a default rule is chosen here. Each config is built,
# checked against the CPU reference and timed once alone first (`mtgpu conv`,
# which also gives its index in the space); a config that fails stops the run.
#
#   bench/config_ab/run.sh DB WORKLOAD 'TEMPLATE|CONFIG' 'TEMPLATE|CONFIG' ...
#                                     (about 10 s per config and round on ResNet-50)
#
# DB: a tuning database with records of WORKLOAD (e.g. one of bench/vs_onednn's);
# WORKLOAD as the database names it (a strided 1x1 layer runs as a subsample
# and the stride-1 workload). The first config is the reference of the ratios.
# Environment (defaults in brackets): NETWORK [resnet50], ROUNDS [3],
# REPEAT [15] passes per profile, LAYER_WORKLOAD the layers' workload in the
# profile where it differs from WORKLOAD [WORKLOAD], BUILD_DIR [build-bench],
# OUT [bench/config_ab/results] gets NAME.md and NAME.json, NAME [config_ab].
set -euo pipefail
cd "$(dirname "$0")/../.."
usage() { sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; }
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then usage; exit 0; fi
if [ $# -lt 3 ]; then usage >&2; exit 2; fi
DB="$1"
WORKLOAD="$2"
shift 2
NETWORK="${NETWORK:-resnet50}"
ROUNDS="${ROUNDS:-3}"
REPEAT="${REPEAT:-15}"
LAYER_WORKLOAD="${LAYER_WORKLOAD:-$WORKLOAD}"
BUILD="${BUILD_DIR:-build-bench}"
OUT="${OUT:-bench/config_ab/results}"
NAME="${NAME:-config_ab}"
[ -f "$DB" ] || { echo "config_ab: no database $DB" >&2; exit 2; }

# shellcheck source=../common/network_bins.sh
. bench/common/network_bins.sh
work="$bin"
mtgpu="$bin/mtgpu"

n=0
for tc in "$@"; do
  tmpl="${tc%%|*}"
  cfg="${tc#*|}"
  if ! "$mtgpu" conv "$WORKLOAD" --template "$tmpl" --config "$cfg" --repeats 3 --json >"$work/conv-$n.json" 2>"$work/conv-$n.err"; then
    echo "config_ab: $tmpl $cfg does not run correctly on $WORKLOAD:" >&2
    cat "$work/conv-$n.json" "$work/conv-$n.err" >&2
    exit 1
  fi
  cp "$DB" "$work/db-$n.db"
  cfg=$(python3 bench/config_ab/rewrite_db.py "$work/db-$n.db" "$WORKLOAD" "$tmpl" "$cfg" "$work/conv-$n.json")
  printf '%s\t%s\n' "$tmpl" "$cfg" >>"$work/configs.tsv"
  n=$((n + 1))
done

for round in $(seq 1 "$ROUNDS"); do
  for j in $(seq 0 $((n - 1))); do
    i=$(((j + round) % n))
    "$mtgpu" run "$NETWORK" --db "$work/db-$i.db" --repeat "$REPEAT" --profile --json >"$work/prof-$i-$round.json"
  done
  echo "config_ab: round $round of $ROUNDS done" >&2
done

# The command that regenerates the table, for its header.
cmd="NETWORK=$NETWORK ROUNDS=$ROUNDS REPEAT=$REPEAT"
[ "$LAYER_WORKLOAD" != "$WORKLOAD" ] && cmd="$cmd LAYER_WORKLOAD=$LAYER_WORKLOAD"
cmd="$cmd NAME=$NAME bench/config_ab/run.sh $DB $WORKLOAD"
for tc in "$@"; do cmd="$cmd '$tc'"; done
python3 bench/config_ab/report.py "$work" "$n" "$ROUNDS" "$NETWORK" "$DB" "$WORKLOAD" "$LAYER_WORKLOAD" "$OUT" "$NAME" \
  "$(git rev-parse --short HEAD)" "$cmd"
