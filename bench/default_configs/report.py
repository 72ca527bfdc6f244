#!/usr/bin/env python3
"""Table of bench/default_configs/run.sh: each template's default config per
convolution (median over the rounds), the default rule's choice (`mtgpu best`
without a database) against the fastest default and against the rule before
it (kvec on a CPU, depthwise for depthwise layers), per layer and per network.
usage: report.py OUT NET...   (environment: NOTE, a sentence put under the heading)"""
import csv
import datetime
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from benchlib import cpu_model  # noqa: E402

TEMPLATES = ["direct", "gemm", "kvec", "wino", "depthwise", "dwrow", "stem"]


def commit():
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", ".", ":!bench/*/results/*"]).returncode != 0
        return rev + ("+changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def jsonl(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def old_rule(times, wl):
    if "groups=" in wl and "depthwise" in times:
        return "depthwise"
    return "kvec" if "kvec" in times else "gemm"


def main():
    out, nets = sys.argv[1], sys.argv[2:]
    rows, totals = [], []
    for net in nets:
        tasks = [t for t in jsonl(os.path.join(out, "raw", net + ".tasks.json")) if "workload" in t]  # the last line: totals
        chosen = {b["workload"]: b["template"] for b in jsonl(os.path.join(out, "raw", net + ".best.json"))}
        runs = {}
        for r in jsonl(os.path.join(out, "raw", net + ".conv.json")):
            if r.get("status") == "ok" and r.get("ms"):
                runs.setdefault(r["workload"], {}).setdefault(r["template"], []).append(r["ms"])
        tot = {"net": net, "rule": 0.0, "old": 0.0, "best": 0.0, "missing": 0}
        for t in tasks:
            wl, n = t["workload"], t["count"]
            times = {k: statistics.median(v) for k, v in runs.get(wl, {}).items()}
            pick = chosen.get(wl)
            if not times or pick not in times:
                tot["missing"] += 1
                continue
            best = min(times, key=times.get)
            old = old_rule(times, wl)
            rows.append({"net": net, "workload": wl, "count": n, "mflop": t["flops"] / 1e6,
                         **{k: times.get(k) for k in TEMPLATES}, "rule": pick, "rule_ms": times[pick],
                         "fastest": best, "rule_over_fastest": times[pick] / times[best],
                         "rule_over_old": times[pick] / times[old]})
            tot["rule"] += n * times[pick]
            tot["old"] += n * times[old]
            tot["best"] += n * times[best]
        totals.append(tot)
    with open(os.path.join(out, "default_configs.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()) if rows else ["net"])
        w.writeheader()
        w.writerows(rows)
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    fmt = lambda v: "" if v is None else "%.3f" % v
    md = ["# Default configs side by side", "",
          "Generated %s by `bench/default_configs/run.sh` (`report.py`) at commit %s on %s, %d cores; PoCL's CPU device." %
          (now, commit(), cpu_model(), os.cpu_count() or 0), ""] + ([os.environ["NOTE"], ""] if os.environ.get("NOTE") else []) + [
          "Every template's default config (`mtgpu conv WL --config default`: each accepting template's in one process, one "
          "after the other), medians over the rounds, ms. `rule`: the template the default rule picks (`mtgpu best NET` "
          "without a database); `old`: kvec everywhere it accepts (depthwise for depthwise layers), the rule before. "
          "Network sums weight each layer by how often it occurs (convolutions only, each timed alone with its data in cache).", "",
          "| network | rule ms | old rule ms | fastest default ms | rule / old | rule / fastest |", "|---|---|---|---|---|---|"]
    for t in totals:
        if t["old"] > 0:
            md.append("| %s | %.2f | %.2f | %.2f | %.2f | %.2f |%s" % (t["net"], t["rule"], t["old"], t["best"], t["rule"] / t["old"],
                      t["rule"] / t["best"], "" if not t["missing"] else " (%d workloads missing)" % t["missing"]))
    md += ["", "| network | workload | count | " + " | ".join(TEMPLATES) + " | rule | rule / fastest | rule / old |",
           "|---|---|---|" + "---|" * len(TEMPLATES) + "---|---|---|"]
    for r in rows:
        md.append("| %s | %s | %d | %s | %s | %.2f | %.2f |" % (r["net"], r["workload"].replace("n=1,", ""), r["count"],
                  " | ".join(fmt(r[k]) for k in TEMPLATES), r["rule"], r["rule_over_fastest"], r["rule_over_old"]))
    md += ["", "Regenerate: `bench/default_configs/run.sh` (environment: NETS, ROUNDS, BUILD_DIR, OUT)."]
    with open(os.path.join(out, "default_configs.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md[:8 + len(totals)]))
    return 0 if all(t["missing"] == 0 for t in totals) else 1


if __name__ == "__main__":
    sys.exit(main())
