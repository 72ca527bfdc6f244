"""Table of bench/config_ab/run.sh: per config, each layer of the workload
inside the network (median over the rounds of its device time in the
profile) and its ratio to the first config's (median of the per-round
ratios, range); the network's convolution time beside them."""
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from benchlib import cpu_model  # noqa: E402


def last_json(path):
    lines = [l for l in open(path) if l.startswith("{")]
    if not lines:
        sys.exit(f"config_ab: no result in {path}")
    return json.loads(lines[-1])


def main():
    work, n, rounds, net, db, workload, layer_wl, out, name, rev, cmd = sys.argv[1:12]
    n, rounds = int(n), int(rounds)
    med = statistics.median
    configs = [l.rstrip("\n").split("\t", 1) for l in open(f"{work}/configs.tsv")]
    prof = [[last_json(f"{work}/prof-{i}-{r}.json") for r in range(1, rounds + 1)] for i in range(n)]
    idx = [j for j, l in enumerate(prof[0][0]["layers"]) if l.get("workload") == layer_wl]
    if not idx:
        sys.exit(f"config_ab: no layer of {net} runs {layer_wl} (set LAYER_WORKLOAD)")
    names = [prof[0][0]["layers"][j]["name"] for j in idx]
    rows = []
    for i in range(n):
        ran = {prof[i][r]["layers"][j].get("config") for r in range(rounds) for j in idx}
        if ran != {configs[i][1]}:
            sys.exit(f"config_ab: config {i} ran as {sorted(ran)}, not {configs[i][1]}")
        ms = [med(prof[i][r]["layers"][j]["ms"] for r in range(rounds)) for j in idx]
        ratios = []
        for j in idx:
            per = [prof[i][r]["layers"][j]["ms"] / prof[0][r]["layers"][j]["ms"] for r in range(rounds)]
            ratios.append((med(per), min(per), max(per)))
        conv = med(p["conv_ms"] for p in prof[i])
        rows.append({"template": configs[i][0], "config": configs[i][1], "layer_ms": dict(zip(names, ms)),
                     "ratio": dict(zip(names, [r[0] for r in ratios])), "ratio_range": dict(zip(names, [r[1:] for r in ratios])),
                     "conv_ms": conv})
    res = {"network": net, "database": db, "workload": workload, "layer_workload": layer_wl, "rounds": rounds, "commit": rev, "command": cmd,
           "cpu": cpu_model(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "configs": rows}
    os.makedirs(out, exist_ok=True)
    json.dump(res, open(f"{out}/{name}.json", "w"), indent=1)
    md = [f"# {net}: configs of `{workload}` side by side inside the network\n",
          f"Generated {res['date']} by `bench/config_ab/run.sh` at commit {rev} on {res['cpu']}; database {db}, rewritten per config "
          f"(bench/config_ab/rewrite_db.py). `mtgpu run {net} --profile` with each config in turns, {rounds} rounds, the order rotating; "
          "a layer's ms is the median over the rounds of its device time, its ratio the median (range) of the per-round ratios to the "
          "first config's (below 1: faster).\n",
          "| template | config | " + " | ".join(f"{l} ms | ratio" for l in names) + " | convolutions ms |",
          "|---|---|" + "---|---|" * len(names) + "---|"]
    for r in rows:
        cells = " | ".join(f"{r['layer_ms'][l]:.3f} | {r['ratio'][l]:.2f} ({r['ratio_range'][l][0]:.2f}-{r['ratio_range'][l][1]:.2f})" for l in names)
        md.append(f"| {r['template']} | `{r['config']}` | {cells} | {r['conv_ms']:.2f} |")
    md += ["", f"Regenerate: `{cmd}` (with the same database; BUILD_DIR and OUT as wanted)."]
    open(f"{out}/{name}.md", "w").write("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
