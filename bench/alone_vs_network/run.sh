#!/usr/bin/env bash
# Each convolution of a network timed alone, as the tuner times it (`mtgpu
# conv --cold`: its weights evicted before every run), against its time
# inside the network's own passes (`mtgpu run --profile`), under each of a
# few environment settings in turns: how far the tuner's measurements are
# from what the network will see, and what a setting (e.g. POCL_AFFINITY,
# whether PoCL pins its worker threads) changes of either. The configs are
# the network's own: the default configs, or those of DB.
# Writes $OUT/$NAME.md and .json (bench/alone_vs_network/report.py).
#
#   bench/alone_vs_network/run.sh [DB]   (ResNet-50, 2 settings, 3 rounds: about 6 minutes)
#
# Environment (defaults in brackets): NETWORK [resnet50], ROUNDS [3],
# REPEAT [10] passes per profile, SETTINGS space-separated VAR=VALUE[,VAR=VALUE]
# sets, one per side ["POCL_AFFINITY=0 POCL_AFFINITY=1"], BUILD_DIR [build-bench],
# OUT [bench/alone_vs_network/results], NAME [NETWORK].
set -euo pipefail
cd "$(dirname "$0")/../.."
usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; }
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then usage; exit 0; fi
if [ $# -gt 1 ]; then usage >&2; exit 2; fi
DB="${1:-}"
NETWORK="${NETWORK:-resnet50}"
ROUNDS="${ROUNDS:-3}"
REPEAT="${REPEAT:-10}"
read -r -a settings <<<"${SETTINGS:-POCL_AFFINITY=0 POCL_AFFINITY=1}"
OUT="${OUT:-bench/alone_vs_network/results}"
NAME="${NAME:-$NETWORK}"
BUILD="${BUILD_DIR:-build-bench}"
log() { echo "alone_vs_network: $*" >&2; }
[ -z "$DB" ] || [ -f "$DB" ] || { log "no database $DB"; exit 2; }

# shellcheck source=../common/network_bins.sh
. bench/common/network_bins.sh
mtgpu="$bin/mtgpu"
raw="$OUT/raw/$NAME"
network_db_and_raw "$DB"

"$mtgpu" best "$NETWORK" ${dbargs[@]+"${dbargs[@]}"} --json >"$raw/best.json"
python3 -c '
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l); print(d["workload"], d["template"], d["config"])' "$raw/best.json" >"$bin/tasks.txt"

for ((r = 0; r < ROUNDS; r++)); do
  for ((i = 0; i < ${#settings[@]}; i++)); do
    k=$(((i + r) % ${#settings[@]}))
    IFS=, read -r -a envs <<<"${settings[$k]}"
    log "round $((r + 1))/$ROUNDS: ${settings[$k]}: the network, then each convolution alone"
    env "${envs[@]}" "$mtgpu" run "$NETWORK" ${dbargs[@]+"${dbargs[@]}"} --repeat "$REPEAT" --profile --json >"$raw/run-$k-$r.json"
    while read -r wl tmpl cfg; do
      env "${envs[@]}" "$mtgpu" conv "$wl" --template "$tmpl" --config "$cfg" --cold --json 2>/dev/null | grep '^{' | tail -n 1 || true
    done <"$bin/tasks.txt" >"$raw/alone-$k-$r.jsonl"
  done
done

python3 bench/alone_vs_network/report.py --raw "$raw" --out "$OUT/$NAME" --network "$NETWORK" --db "${DB:-none (default configs)}" \
  --rounds "$ROUNDS" --repeat "$REPEAT" --cpu "$(PYTHONPATH=bench/common python3 -c 'import benchlib; print(benchlib.cpu_model())')" \
  --cores "$(nproc)" --commit "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
  --command "NETWORK=$NETWORK ROUNDS=$ROUNDS SETTINGS=\"${settings[*]}\" bench/alone_vs_network/run.sh${DB:+ $DB}" "${settings[@]}"
