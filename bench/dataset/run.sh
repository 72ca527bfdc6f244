#!/usr/bin/env bash
# Builds the cost-model data set: measured records of random
# configs of many convolutions on the OpenCL device, in one SQLite database
# (the tuning database's schema, so `mtgpu train` and `mtgpu eval-model` read
# it directly).
#
#   bench/dataset/run.sh [DB]          (default data/opencl_dataset.db)
#
# Workloads: the unique convolutions of resnet18, resnet50, mobilenet_v2,
# vgg16 and squeezenet1_1 (their union, 60+ workloads), in an order that
# interleaves the networks, then as many as WORKLOADS (default 40) of them.
# Each gets CONFIGS (default 200) random configs over every template that
# accepts it, measured in the isolated worker by `mtgpu tune --cost-model
# random` (random search), each committed as it is measured. The script is
# resumable: rerun it with the same DB and it continues where it stopped
# (measured configs count). TIME_LIMIT (seconds, default 0: none) stops it.
# Runtime on the 2-core development machine: 0.5-2.7 s per config (1.7 on
# average for the last 12 workloads of the committed set), so the 32
# workloads x 200 configs of data/opencl_dataset.db take about 3 hours; the
# per-workload order means a partial run is still a usable set of fewer
# workloads.
set -euo pipefail
cd "$(dirname "$0")/../.."
DB="${1:-data/opencl_dataset.db}"
BUILD="${BUILD_DIR:-build-bench}"
CONFIGS="${CONFIGS:-200}"
WORKLOADS="${WORKLOADS:-40}"
TIME_LIMIT="${TIME_LIMIT:-0}"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DMTGPU_TESTS=OFF >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target mtgpu_cli mtgpu_worker >/dev/null
mkdir -p "$(dirname "$DB")"

# Interleave the networks' task lists so a partial run covers all of them.
mapfile -t wls < <(python3 - "$BUILD/mtgpu" "$WORKLOADS" <<'PY'
import json, subprocess, sys
exe, limit = sys.argv[1], int(sys.argv[2])
lists = []
for net in ("resnet50", "mobilenet_v2", "resnet18", "vgg16", "squeezenet1_1"):
    out = subprocess.run([exe, "tasks", net, "--json"], check=True, capture_output=True, text=True).stdout
    lists.append([json.loads(l)["workload"] for l in out.splitlines() if l.startswith("{") and "workload" in l])
seen, order = set(), []
for i in range(max(len(l) for l in lists)):
    for l in lists:
        if i < len(l) and l[i] not in seen:
            seen.add(l[i]); order.append(l[i])
print("\n".join(order[:limit]))
PY
)
echo "dataset: ${#wls[@]} workloads x $CONFIGS configs -> $DB" >&2
start=$(date +%s)
for wl in "${wls[@]}"; do
  left=0
  if [ "$TIME_LIMIT" -gt 0 ]; then
    left=$((TIME_LIMIT - ($(date +%s) - start)))
    if [ "$left" -le 0 ]; then echo "dataset: time limit reached" >&2; break; fi
  fi
  "$BUILD"/mtgpu tune "$wl" --cost-model random --trials "$CONFIGS" --early-stop 0 --db "$DB" --time-limit "$left" \
    --seed 1 >/dev/null || echo "dataset: $wl: mtgpu tune failed (exit $?); going on" >&2
  n=$(sqlite3 "file:$DB?mode=ro" "select count(*) from records" 2>/dev/null || echo "?")
  echo "dataset: $wl done; $n records in $DB after $(( $(date +%s) - start )) s" >&2
done
