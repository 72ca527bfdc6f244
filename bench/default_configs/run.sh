#!/usr/bin/env bash
# Each template's default config against the others on every unique
# convolution of some networks, side by side: `mtgpu conv WL --config default`
# times every accepting template's default config in one process, one after
# the other, ROUNDS times (median per template); `mtgpu best NET` (no database)
# names the template the default rule picks (records/select.c). The report
# says, per layer and per network (layers weighted by how often they occur),
# how the rule's choice compares with the fastest default and with kvec's.
# Writes $OUT/default_configs.{csv,md} (bench/default_configs/report.py).
#
#   bench/default_configs/run.sh
#
# Environment (defaults in brackets):
#   NETS       networks ["resnet50 resnet18 vgg16 mobilenet_v2"]
#   ROUNDS     runs of every workload [2]
#   BUILD_DIR  build directory [build-bench]
#   OUT        where the results go [bench/default_configs/results]
# Exit status: 0 when every default config of every workload ran, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD="${BUILD_DIR:-build-bench}"
NETS="${NETS:-resnet50 resnet18 vgg16 mobilenet_v2}"
ROUNDS="${ROUNDS:-2}"
OUT="${OUT:-bench/default_configs/results}"
log() { echo "default_configs: $*" >&2; }

scripts/setup.sh >/dev/null
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target mtgpu_cli >/dev/null
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
cp "$BUILD"/mtgpu "$bin"/
# No tuning database: `mtgpu best` then names the default rule's template.
export MTGPU_DB="$bin/none.db"
mkdir -p "$OUT/raw"
rm -f "$OUT"/raw/*.json
status=0
for net in $NETS; do
  "$bin"/mtgpu tasks "$net" --json >"$OUT/raw/$net.tasks.json"
  "$bin"/mtgpu best "$net" --json >"$OUT/raw/$net.best.json"
  n=$(wc -l <"$OUT/raw/$net.tasks.json")
  i=0
  while read -r wl; do
    i=$((i + 1))
    log "$net $i/$n $wl"
    for round in $(seq 1 "$ROUNDS"); do
      "$bin"/mtgpu conv "$wl" --config default --json >>"$OUT/raw/$net.conv.json" || status=1
    done
  done < <(python3 -c 'import json,sys
for l in open(sys.argv[1]):
    t = json.loads(l)
    if "workload" in t: print(t["workload"])' "$OUT/raw/$net.tasks.json")
done
python3 bench/default_configs/report.py "$OUT" $NETS || status=1
exit $status
