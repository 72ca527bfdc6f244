#!/usr/bin/env bash
# Whole-network speed of two builds side by side: `mtgpu run NETWORK --db DB`
# with a base revision's build (BASE) and the working tree's, in turns,
# ROUNDS times each: the median wall time of whole passes (no profiling), and
# from a separate --profile pass the device time per operation kind and per
# layer. Both builds read the same database, so a change to a kernel
# generator or to the fixed op kernels shows as the ratio of the two columns
# (a change to a template's space would pick other configs: compare those
# with bench/e2e/run.sh instead).
#
#   bench/net_ab/run.sh [DB]         (about 5 minutes for ResNet-50 on the 2-core machine)
#
# DB: a tuning database with the network's records (e.g. from
# `DB_OUT=/tmp/r50.db bench/tune_network/run.sh`); without one every layer
# runs its default config. Environment (defaults in brackets): BASE [HEAD],
# NETWORK [resnet50], ROUNDS [3], REPEAT [20] passes per run, OUT
# [bench/net_ab/results] gets NAME.md and NAME.json, NAME [net_ab].
set -euo pipefail
cd "$(dirname "$0")/../.."
DB="${1:-}"
BASE="${BASE:-HEAD}"
NETWORK="${NETWORK:-resnet50}"
ROUNDS="${ROUNDS:-3}"
REPEAT="${REPEAT:-20}"
OUT="${OUT:-bench/net_ab/results}"
NAME="${NAME:-net_ab}"
. bench/common/two_builds.sh
bench_base_and_head mtgpu-net-ab "$BASE"
for round in $(seq 1 "$ROUNDS"); do
  # the order alternates, so that neither build always runs first in a round
  order="base head"
  [ $((round % 2)) -eq 0 ] && order="head base"
  for b in $order; do
    bench_run_net "$work/$b-build/mtgpu" "$DB" "$NETWORK" --repeat "$REPEAT" --json >"$work/wall-$b-$round.json"
    bench_run_net "$work/$b-build/mtgpu" "$DB" "$NETWORK" --repeat "$REPEAT" --json --profile >"$work/prof-$b-$round.json"
  done
  echo "net_ab: round $round of $ROUNDS done" >&2
done

PYTHONPATH=bench/common python3 - "$work" "$ROUNDS" "$NETWORK" "${DB:-none (default configs)}" "$OUT" "$NAME" "$base_rev" "$head_rev" <<'PY'
import json, os, statistics, sys, time
import benchlib
work, rounds, net, db, out, name, base_rev, head_rev = sys.argv[1:]
rounds = int(rounds)
def last_json(path):
    return [json.loads(l) for l in open(path) if l.startswith("{")][-1]
builds = ("base", "head")
wall = {b: [last_json(f"{work}/wall-{b}-{r}.json") for r in range(1, rounds + 1)] for b in builds}
prof = {b: [last_json(f"{work}/prof-{b}-{r}.json") for r in range(1, rounds + 1)] for b in builds}
med = statistics.median
net_ms = {b: med(d["median_ms"] for d in wall[b]) for b in builds}
# the machine's speed drifts between rounds: a ratio taken within each round, then their median and range
wall_ratios = [wall["base"][i]["median_ms"] / wall["head"][i]["median_ms"] for i in range(rounds)]
dev_ms = {b: med(d["device_ms"] for d in prof[b]) for b in builds}
kinds = sorted({k for b in builds for d in prof[b] for k in d["kinds"]}, key=lambda k: -prof["head"][0]["kinds"].get(k, 0))
kind_ms = {b: {k: med(d["kinds"].get(k, 0.0) for d in prof[b]) for k in kinds} for b in builds}
layers = []
for i, l in enumerate(prof["head"][0]["layers"]):
    ms = {b: med(d["layers"][i]["ms"] for d in prof[b]) for b in builds}
    per_round = [prof["base"][r]["layers"][i]["ms"] / prof["head"][r]["layers"][i]["ms"] if prof["head"][r]["layers"][i]["ms"] > 0 else None
                 for r in range(rounds)]
    layers.append({"layer": l["name"], "kind": l["kind"], "template": l.get("template"), "workload": l.get("workload"),
                   "config": l.get("config"), "base_ms": ms["base"], "head_ms": ms["head"], "round_ratios": per_round})
# The window drifts within a round too, between the two builds' passes: the
# median of the convolutions' ratios in a round is that drift wherever a
# change leaves most layers as they were, and a layer's ratio over it, taken
# within the round, is its change with the drift taken out.
drift = []
for r in range(rounds):
    conv = [l["round_ratios"][r] for l in layers if l["kind"] == "conv2d" and l["round_ratios"][r]]
    drift.append(med(conv) if conv else None)
for l in layers:
    rel = [x / d for x, d in zip(l["round_ratios"], drift) if x and d]
    l["against_drift"] = med(rel) if rel else None
    l["against_drift_range"] = [min(rel), max(rel)] if rel else None
res = {"network": net, "database": db, "base": base_rev, "head": head_rev, "rounds": rounds, "cpu": benchlib.cpu_model(),
       "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "network_median_ms": net_ms, "network_round_ratios": wall_ratios, "device_ms": dev_ms,
       "kind_ms": kind_ms, "round_drift": drift, "layers": layers}
os.makedirs(out, exist_ok=True)
json.dump(res, open(f"{out}/{name}.json", "w"), indent=1)
r = lambda b, h: f"{b / h:.2f}" if h else "-"
md = [f"# {net}: two builds side by side\n",
      f"Generated {res['date']} by `bench/net_ab/run.sh` on {res['cpu']}, {os.cpu_count()} cores (base {base_rev}, head {head_rev}; database: {db}): "
      f"`mtgpu run {net}` with each build in turns, {rounds} rounds, the order alternating; cells are medians of the rounds. Network: median wall "
      "time of whole passes without profiling; the rest from `--profile` passes (device time). Ratio: base / head (above 1: "
      "head faster).\n",
      "| | base ms | head ms | ratio |", "|---|---|---|---|",
      f"| network, median wall | {net_ms['base']:.2f} | {net_ms['head']:.2f} | {r(net_ms['base'], net_ms['head'])} |",
      f"| network wall, per-round ratios | | | {med(wall_ratios):.2f} ({min(wall_ratios):.2f}-{max(wall_ratios):.2f}) |",
      f"| all kernels, device | {dev_ms['base']:.2f} | {dev_ms['head']:.2f} | {r(dev_ms['base'], dev_ms['head'])} |"]
known = [d for d in drift if d]
if known:
    md.append(f"| convolutions' median per-round ratio (the drift) | | | {med(known):.2f} ({min(known):.2f}-{max(known):.2f}) |")
for k in kinds:
    md.append(f"| {k}, device | {kind_ms['base'][k]:.3f} | {kind_ms['head'][k]:.3f} | {r(kind_ms['base'][k], kind_ms['head'][k])} |")
md += ["", "Per layer: ratio of the median times; against drift: the median (range) over the rounds of the layer's ratio in a "
       "round over that round's drift (meaningful where the change leaves most convolutions as they were).", "",
       "| layer | kind | template | workload | base ms | head ms | ratio | against drift |", "|---|---|---|---|---|---|---|---|"]
for l in layers:
    ad = f"{l['against_drift']:.2f} ({l['against_drift_range'][0]:.2f}-{l['against_drift_range'][1]:.2f})" if l["against_drift"] else "-"
    md.append(f"| {l['layer']} | {l['kind']} | {l['template'] or '-'} | {'`' + l['workload'] + '`' if l['workload'] else '-'} | "
              f"{l['base_ms']:.3f} | {l['head_ms']:.3f} | {r(l['base_ms'], l['head_ms'])} | {ad} |")
open(f"{out}/{name}.md", "w").write("\n".join(md) + "\n")
print("\n".join(md[:8 + len(kinds)]))
PY
