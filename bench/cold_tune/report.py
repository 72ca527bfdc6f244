#!/usr/bin/env python3
"""Report of bench/cold_tune/run.sh: per network, the four sides' latencies
round by round and the ratios within each round (their median over the
rounds, with the range); from each tuning's log, its wall time, the sum of
its best isolated times (the tuner's estimate of the network's convolutions),
the network's convolutions inside the network with the fastest records and
with what refinement kept, and how many workloads kept a record or the
default config. Writes cold_tune.md and cold_tune.json."""
import argparse
import datetime
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from benchlib import round_ratio, side_rounds  # noqa: E402

SIDES = ["onednn_any", "default", "warm", "cold"]
MODES = ["warm", "cold"]


def load_json(path):
    with open(path) as f:
        return json.load(f)


def tune_log(path):
    """What a `mtgpu tune NET` log says about the tuning and its refinement."""
    out = {"estimate_ms": None, "fastest_ms": None, "kept_ms": None, "kept": {}, "workloads": 0}
    if not os.path.exists(path):
        return out
    in_table = False
    for line in open(path):
        m = re.search(r"estimated network convolution time \(sum of best time x count\): ([0-9.]+) ms", line)
        if m:
            out["estimate_ms"] = float(m.group(1))
        m = re.search(r"convolutions in the network: ([0-9.]+) ms with the fastest records, ([0-9.]+) ms with the kept configs", line)
        if m:
            out["fastest_ms"], out["kept_ms"] = float(m.group(1)), float(m.group(2))
        if line.startswith("workload (device ms in the network"):
            in_table = True
            continue
        if in_table and line.startswith("kept:"):
            in_table = False
        elif in_table and line.startswith("n="):
            kept = re.sub(r"\s*\(.*\)\s*$", "", line.rstrip()).split()[-1]
            out["kept"][kept] = out["kept"].get(kept, 0) + 1
            out["workloads"] += 1
    return out


def network(work, net, rounds):
    rows = side_rounds(work, net, SIDES, rounds)

    def ratio(a, b):
        return round_ratio(rows, a, b)

    out = {"network": net, "rounds": rows,
           "median_ms": {s: statistics.median([x[s] for x in rows if x[s]]) if any(x[s] for x in rows) else None for s in SIDES},
           "cold_vs_warm": ratio("cold", "warm"), "cold_vs_default": ratio("cold", "default"), "warm_vs_default": ratio("warm", "default"),
           "cold_vs_any": ratio("cold", "onednn_any"), "warm_vs_any": ratio("warm", "onednn_any"),
           "default_vs_any": ratio("default", "onednn_any")}
    for mode in MODES:
        tj = os.path.join(work, f"{net}.{mode}.tune.json")
        t = tune_log(os.path.join(work, f"{net}.{mode}.tune.log"))
        t["tune_wall_s"] = load_json(tj).get("tune_wall_s") if os.path.exists(tj) else None
        out["tune_" + mode] = t
    return out


def fmt(x, f="{:.2f}"):
    return "-" if x is None else f.format(x)


def fr(r):
    return "-" if r is None else f"{r[0]:.2f} ({r[1]:.2f}-{r[2]:.2f})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, required=True)
    ap.add_argument("--repeat", type=int, required=True)
    ap.add_argument("--cpu", default="unknown")
    ap.add_argument("--cores", default="?")
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("nets", nargs="*")
    a = ap.parse_args()
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    nets = [network(a.work, n, a.rounds) for n in a.nets]
    md = ["# Warm against cold measurement in `mtgpu tune`", "",
          f"Generated {now} by `bench/cold_tune/run.sh` (`bench/cold_tune/report.py`) at commit {a.commit} on {a.cpu}, "
          f"{a.cores} cores; mtgpu through PoCL's CPU device, oneDNN with its blocked layouts (`any`).", "",
          "Each network tuned twice at `mtgpu tune`'s defaults into fresh databases: `--measure warm` (each config run back to "
          "back, its weights left in the caches) and `--measure cold` (weights evicted from the caches before every "
          "timed run, as a network's pass finds them). Then oneDNN, the default configs (no database) and the two tuned "
          f"networks timed in turns: {a.rounds} rounds, the order rotating each round, each the median of {a.repeat} passes. "
          "A ratio is taken within a round and the table gives its median over the rounds, with the range. Below 1: the "
          "first side faster.", "",
          "| network | oneDNN any ms | default ms | warm-tuned ms | cold-tuned ms | cold / warm | cold / default | warm / default | cold / any | warm / any | default / any |",
          "|---|---|---|---|---|---|---|---|---|---|---|"]
    for n in nets:
        m = n["median_ms"]
        md.append(f"| {n['network']} | {fmt(m['onednn_any'])} | {fmt(m['default'])} | {fmt(m['warm'])} | {fmt(m['cold'])} | "
                  f"{fr(n['cold_vs_warm'])} | {fr(n['cold_vs_default'])} | {fr(n['warm_vs_default'])} | {fr(n['cold_vs_any'])} | "
                  f"{fr(n['warm_vs_any'])} | {fr(n['default_vs_any'])} |")
    md += ["", "## The tunings", "",
           "`estimate`: the tuner's sum of each convolution's best isolated time x its count; `in network, fastest records` and "
           "`kept`: the refinement's profiled passes (device time of the convolutions) with every convolution at its fastest record, "
           "and at what the refinement kept (a record, or the default where it was faster there); `estimate / in network`: how far "
           "the isolated times were from the network's.", "",
           "| network | measure | tuning wall s | estimate ms | in network, fastest records ms | estimate / in network | kept ms | workloads | kept a tuned record | kept the default |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for n in nets:
        for mode in MODES:
            t = n["tune_" + mode]
            rec = sum(v for k, v in t["kept"].items() if k.startswith("rec"))
            ratio = t["estimate_ms"] / t["fastest_ms"] if t["estimate_ms"] and t["fastest_ms"] else None
            md.append(f"| {n['network']} | {mode} | {fmt(t['tune_wall_s'], '{}')} | {fmt(t['estimate_ms'], '{:.2f}')} | "
                      f"{fmt(t['fastest_ms'])} | {fmt(ratio)} | {fmt(t['kept_ms'])} | {t['workloads']} | {rec} | {t['kept'].get('default', 0)} |")
    md += ["", "Regenerate: `bench/cold_tune/run.sh` (two tunings per network first: about 8-20 minutes each on this machine).", ""]
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "cold_tune.md"), "w") as f:
        f.write("\n".join(md))
    with open(os.path.join(a.out, "cold_tune.json"), "w") as f:
        json.dump({"generated": now, "commit": a.commit, "cpu": a.cpu, "cores": a.cores, "rounds": a.rounds, "repeat": a.repeat,
                   "networks": nets}, f, indent=1)
    print("\n".join(md))


if __name__ == "__main__":
    main()
