#!/usr/bin/env bash
# The kvec template's work-group order, measured where it matters: inside a
# whole network, where each layer's weights come from memory. Builds the
# working tree twice with kvec_pixels_first (ir/tmpl_kvec.c) forced one way
# and the other (channel blocks first / pixel blocks first), runs
# `mtgpu run NETWORK --profile` with both builds in turns, ROUNDS times each,
# and writes per-layer device times (medians of the rounds), which order the
# rule picks for each layer, and the network time with each order and with
# the rule's choice.
#
#   bench/run_kernel_order.sh [DB]     (about 3 minutes on the 2-core machine)
#
# DB: a tuning database with the network's records (e.g. from
# `DB_OUT=/tmp/r50.db bench/run_tune_network.sh`); without one every layer
# runs its default config (on a CPU: kvec). Environment (defaults in
# brackets): NETWORK [resnet50], ROUNDS [3], OUT [bench/results] gets
# kernel_order.md and kernel_order.json.
set -euo pipefail
cd "$(dirname "$0")/.."
DB="${1:-}"
NETWORK="${NETWORK:-resnet50}"
ROUNDS="${ROUNDS:-3}"
OUT="${OUT:-bench/results}"
work=$(mktemp -d /tmp/mtgpu-kernel-order-XXXXXX)
trap 'rm -rf "$work"' EXIT

grep -q '^static int kvec_pixels_first(const kvec_plan \*p) {$' ir/tmpl_kvec.c ||
  { echo "run_kernel_order: kvec_pixels_first not found in ir/tmpl_kvec.c" >&2; exit 1; }
# Each variant: a copy of the tracked sources with the rule's body replaced.
for v in channels pixels; do
  mkdir -p "$work/$v-src"
  git ls-files -z | xargs -0 cp --parents -t "$work/$v-src"
  ret=$([ $v = pixels ] && echo 1 || echo 0)
  sed -i "/^static int kvec_pixels_first(const kvec_plan \*p) {\$/a\\    if (p) return $ret; /* run_kernel_order.sh: forced */" "$work/$v-src/ir/tmpl_kvec.c"
  cmake -S "$work/$v-src" -B "$work/$v-build" -DCMAKE_BUILD_TYPE=Release -DMTGPU_TESTS=OFF >/dev/null
  cmake --build "$work/$v-build" -j"$(nproc)" --target mtgpu_cli mtgpu_worker >/dev/null
done
# The rule's own choice per workload, from the unmodified tree's build.
cmake -S . -B "$work/rule-build" -DCMAKE_BUILD_TYPE=Release -DMTGPU_TESTS=OFF >/dev/null
cmake --build "$work/rule-build" -j"$(nproc)" --target mtgpu_cli mtgpu_worker >/dev/null

db_args=()
[ -n "$DB" ] && db_args=(--db "$DB")
if [ -z "$DB" ]; then mkdir -p "$work/home"; fi # no database: defaults only
for round in $(seq 1 "$ROUNDS"); do
  for v in channels pixels; do
    if [ -n "$DB" ]; then
      "$work/$v-build/mtgpu" run "$NETWORK" "${db_args[@]}" --repeat 20 --profile --json >"$work/run-$v-$round.json"
    else
      env -u MTGPU_DB HOME="$work/home" "$work/$v-build/mtgpu" run "$NETWORK" --repeat 20 --profile --json >"$work/run-$v-$round.json"
    fi
  done
  echo "run_kernel_order: round $round of $ROUNDS done" >&2
done
"$work/rule-build/mtgpu" tasks "$NETWORK" --json >"$work/tasks.jsonl"

python3 - "$work" "$ROUNDS" "$NETWORK" "${DB:-none (default configs)}" "$OUT" <<'PY'
import json, os, statistics, sys, time
work, rounds, net, db, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
def last_json(path):
    return [json.loads(l) for l in open(path) if l.startswith("{")][-1]
runs = {v: [last_json(f"{work}/run-{v}-{r}.json") for r in range(1, rounds + 1)] for v in ("channels", "pixels")}
# Layer name -> workload, from the network description the executor ran.
layers = [l for l in runs["channels"][0]["layers"] if l["kind"] == "conv2d"]
def wl_of(layer):
    return layer.get("workload", "")
def rule(wl):
    # The same arithmetic as kvec_pixels_first.
    f = dict(kv.split("=") for kv in wl.split(","))
    n, c, h, w, k, r, s = (int(f.get(x, 1)) for x in ("n", "c", "h", "w", "k", "r", "s"))
    sh = int(f.get("stride", "1").split("x")[0])
    return (k + 15) // 16 * 16 * c * r * s * 4 > 2 * (n * c * h * w * 4 // sh)
rows, tot = [], {"channels": 0.0, "pixels": 0.0, "rule": 0.0}
for l in layers:
    name = l["name"]
    med = {v: statistics.median([{x["name"]: x["ms"] for x in d["layers"]}[name] for d in runs[v]]) for v in runs}
    wl = wl_of(l)
    pick = ("pixels" if rule(wl) else "channels") if wl and l.get("template") == "kvec" else "-"
    tot["channels"] += med["channels"]; tot["pixels"] += med["pixels"]
    tot["rule"] += med[pick] if pick != "-" else med["channels"]
    rows.append({"layer": name, "template": l.get("template"), "workload": wl, "channels_ms": med["channels"], "pixels_ms": med["pixels"], "rule": pick})
net_ms = {v: statistics.median(d["median_ms"] for d in runs[v]) for v in runs}
res = {"network": net, "database": db, "rounds": rounds, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
       "network_median_ms": net_ms, "conv_device_ms": tot, "layers": rows}
os.makedirs(out, exist_ok=True)
json.dump(res, open(f"{out}/kernel_order.json", "w"), indent=1)
md = [f"# kvec work-group order inside {net}\n",
      f"Generated {res['date']} by `bench/run_kernel_order.sh` (database: {db}): the working tree built twice with "
      "`kvec_pixels_first` forced to channel blocks first and to pixel blocks first, `mtgpu run --profile` with each "
      f"in turns, {rounds} rounds; cells are medians (device ms per layer). `rule`: the order kvec_pixels_first picks "
      "(weights more than twice the input rows read: pixels first); `-` for layers that are not kvec.\n",
      "| | channels first | pixels first | the rule's choice |", "|---|---|---|---|",
      f"| convolutions, device ms | {tot['channels']:.2f} | {tot['pixels']:.2f} | {tot['rule']:.2f} |",
      f"| network, median wall ms | {net_ms['channels']:.2f} | {net_ms['pixels']:.2f} | |", "",
      "| layer | template | workload | channels first ms | pixels first ms | channels / pixels | rule |", "|---|---|---|---|---|---|---|"]
for r in rows:
    md.append(f"| {r['layer']} | {r['template']} | `{r['workload']}` | {r['channels_ms']:.3f} | {r['pixels_ms']:.3f} | "
              f"{r['channels_ms'] / r['pixels_ms']:.2f} | {r['rule']} |")
open(f"{out}/kernel_order.md", "w").write("\n".join(md) + "\n")
print("\n".join(md[:8]))
PY
