#!/usr/bin/env bash
# The kvec template's work-group order, measured where it matters: inside a
# whole network, where each layer's weights come from memory. Builds the
# working tree three times: with kvec_pixels_first (ir/tmpl_kvec.c) forced to
# channel blocks first, forced to pixel blocks first, and unchanged (the
# rule); runs `mtgpu run NETWORK --profile` with the three builds in turns,
# ROUNDS times each, and writes per-layer device times (medians of the
# rounds), the order the rule's build generates for each kvec layer (read
# from its kernel source), and the network time of each build.
#
#   bench/kernel_order/run.sh [DB]     (about 5 minutes on the 2-core machine)
#
# DB: a tuning database with the network's records (e.g. from
# `DB_OUT=/tmp/r50.db bench/tune_network/run.sh`); without one every layer
# runs its default config (on a CPU: kvec). Environment (defaults in
# brackets): NETWORK [resnet50], ROUNDS [3], OUT [bench/kernel_order/results] gets
# kernel_order.md and kernel_order.json.
set -euo pipefail
cd "$(dirname "$0")/../.."
DB="${1:-}"
NETWORK="${NETWORK:-resnet50}"
ROUNDS="${ROUNDS:-3}"
OUT="${OUT:-bench/kernel_order/results}"
work=$(mktemp -d /tmp/mtgpu-kernel-order-XXXXXX)
trap 'rm -rf "$work"' EXIT
. bench/common/two_builds.sh

grep -q '^static int kvec_pixels_first(const kvec_plan \*p) {$' ir/tmpl_kvec.c ||
  { echo "kernel_order: kvec_pixels_first not found in ir/tmpl_kvec.c" >&2; exit 1; }
# The forced variants: a copy of the tracked sources with the rule's body replaced.
for v in channels pixels; do
  mkdir -p "$work/$v-src"
  git ls-files -z | xargs -0 cp --parents -t "$work/$v-src"
  ret=$([ $v = pixels ] && echo 1 || echo 0)
  sed -i "/^static int kvec_pixels_first(const kvec_plan \*p) {\$/a\\    if (p) return $ret; /* kernel_order/run.sh: forced */" "$work/$v-src/ir/tmpl_kvec.c"
  bench_release_build "$work/$v-src" "$work/$v-build"
done
bench_release_build . "$work/rule-build"

variants="channels pixels rule"
for round in $(seq 1 "$ROUNDS"); do
  for v in $variants; do
    bench_run_net "$work/$v-build/mtgpu" "$DB" "$NETWORK" --repeat 20 --profile --json >"$work/run-$v-$round.json"
  done
  echo "kernel_order: round $round of $ROUNDS done" >&2
done

python3 - "$work" "$ROUNDS" "$NETWORK" "${DB:-none (default configs)}" "$OUT" <<'PY'
import json, os, re, statistics, subprocess, sys, time
work, rounds, net, db, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
def last_json(path):
    return [json.loads(l) for l in open(path) if l.startswith("{")][-1]
variants = ("channels", "pixels", "rule")
runs = {v: [last_json(f"{work}/run-{v}-{r}.json") for r in range(1, rounds + 1)] for v in variants}
layers = [l for l in runs["rule"][0]["layers"] if l["kind"] == "conv2d"]
def group_axis(src, var):
    m = re.search(r"const int " + var + r"_\d+ = \(int\)get_group_id\((\d)\);", src)
    return int(m.group(1)) if m else None
orders = {}
def order_of(layer):
    """The order the rule's build generated: read from its kernel's source."""
    if layer.get("template") != "kvec":
        return "-"
    key = (layer["workload"], layer["config"])
    if key not in orders:
        src = subprocess.run([f"{work}/rule-build/mtgpu", "conv", key[0], "--template", "kvec", "--config", key[1], "--source"],
                             check=True, capture_output=True, text=True).stdout
        bk, bz = group_axis(src, "bk"), group_axis(src, "bz")
        orders[key] = "channels" if bk == 0 or (bk is None and bz != 0) else "pixels"
    return orders[key]
rows, tot = [], {v: 0.0 for v in variants}
for l in layers:
    name = l["name"]
    med = {v: statistics.median([{x["name"]: x["ms"] for x in d["layers"]}[name] for d in runs[v]]) for v in variants}
    for v in variants:
        tot[v] += med[v]
    rows.append({"layer": name, "template": l.get("template"), "workload": l["workload"], "order": order_of(l),
                 **{f"{v}_ms": med[v] for v in variants}})
net_ms = {v: statistics.median(d["median_ms"] for d in runs[v]) for v in variants}
res = {"network": net, "database": db, "rounds": rounds, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
       "network_median_ms": net_ms, "conv_device_ms": tot, "layers": rows}
os.makedirs(out, exist_ok=True)
json.dump(res, open(f"{out}/kernel_order.json", "w"), indent=1)
md = [f"# kvec work-group order inside {net}\n",
      f"Generated {res['date']} by `bench/kernel_order/run.sh` (database: {db}): the working tree built three times, with "
      "`kvec_pixels_first` forced to channel blocks first, forced to pixel blocks first, and unchanged (the rule), "
      f"`mtgpu run --profile` with each in turns, {rounds} rounds; cells are medians (device ms per layer). `order`: the "
      "order the rule's build generates for the layer (read from its kernel source: pixels first when the weights are "
      "more than twice the input rows read); `-` for layers that are not kvec.\n",
      "| | channels first | pixels first | the rule |", "|---|---|---|---|",
      f"| convolutions, device ms | {tot['channels']:.2f} | {tot['pixels']:.2f} | {tot['rule']:.2f} |",
      f"| network, median wall ms | {net_ms['channels']:.2f} | {net_ms['pixels']:.2f} | {net_ms['rule']:.2f} |", "",
      "| layer | template | workload | channels first ms | pixels first ms | rule ms | channels / pixels | order |",
      "|---|---|---|---|---|---|---|---|"]
for r in rows:
    md.append(f"| {r['layer']} | {r['template']} | `{r['workload']}` | {r['channels_ms']:.3f} | {r['pixels_ms']:.3f} | "
              f"{r['rule_ms']:.3f} | {r['channels_ms'] / r['pixels_ms']:.2f} | {r['order']} |")
open(f"{out}/kernel_order.md", "w").write("\n".join(md) + "\n")
print("\n".join(md[:8]))
PY
