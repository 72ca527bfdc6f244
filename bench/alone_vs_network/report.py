"""Tables of bench/alone_vs_network/run.sh: per convolution of the network,
its time alone (cold, as the tuner measures) against its time inside the
network's passes, under each environment setting; ratios between settings
are taken within a round."""
import argparse
import datetime
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from benchlib import fmt_spread as fmt, spread  # noqa: E402


def task_of(layer_wl):
    """The task a layer runs as: a strided 1x1 layer is the stride-1 convolution of its subsampled input."""
    kv = dict(p.split("=") for p in layer_wl.split(","))
    if kv.get("r") == "1" and kv.get("s") == "1" and kv.get("stride", "1") not in ("1", "1x1") and kv.get("pad", "0") in ("0", "0x0"):
        st = int(re.split("x", kv["stride"])[0])
        kv["h"], kv["w"], kv["stride"] = str(-(-int(kv["h"]) // st)), str(-(-int(kv["w"]) // st)), "1"
        return ",".join(f"{k}={v}" for k, v in kv.items())
    return layer_wl


def main():
    ap = argparse.ArgumentParser()
    for a in ("raw", "out", "network", "db", "cpu", "commit", "command"):
        ap.add_argument("--" + a, required=True)
    for a in ("rounds", "repeat", "cores"):
        ap.add_argument("--" + a, type=int, required=True)
    ap.add_argument("settings", nargs="+")
    a = ap.parse_args()
    S = range(len(a.settings))
    tasks = [json.loads(l) for l in open(os.path.join(a.raw, "best.json")) if l.startswith("{")]
    runs = [[json.load(open(os.path.join(a.raw, f"run-{k}-{r}.json"))) for r in range(a.rounds)] for k in S]
    alone = [[{d["workload"]: d for d in (json.loads(l) for l in open(os.path.join(a.raw, f"alone-{k}-{r}.jsonl")) if l.startswith("{"))}
              for r in range(a.rounds)] for k in S]
    failed = sorted({f"{d['workload']} {d['status']}" for k in S for r in range(a.rounds) for d in alone[k][r].values() if d.get("status") != "ok"})

    def inside(run, wl):  # per-layer ms of the task's layers in one pass
        v = [l["ms"] for l in run["layers"] if l.get("kind") == "conv2d" and task_of(l["workload"]) == wl]
        return sum(v) / len(v) if v else None

    rows = []
    for t in tasks:
        wl = t["workload"]
        row = {"workload": wl, "count": t["count"], "template": t["template"], "config": t["config"], "settings": []}
        for k in S:
            al = [alone[k][r][wl]["ms"] for r in range(a.rounds) if wl in alone[k][r] and alone[k][r][wl].get("status") == "ok"]
            ins = [inside(runs[k][r], wl) for r in range(a.rounds)]
            ratio = [x / y for x, y in zip([alone[k][r].get(wl, {}).get("ms") for r in range(a.rounds)], ins) if x and y]
            row["settings"].append({"alone_ms": statistics.median(al) if al else None, "alone_all": al,
                                    "inside_ms": statistics.median([x for x in ins if x]) if any(ins) else None,
                                    "alone_vs_inside": spread(ratio)})
        rows.append(row)

    # Whole network per setting and round: the sum of alone times (each task by its layers) and the pass.
    net = []
    for k in S:
        sums = [sum(t["count"] * alone[k][r][t["workload"]]["ms"] for t in tasks if alone[k][r].get(t["workload"], {}).get("status") == "ok")
                for r in range(a.rounds)]
        conv = [runs[k][r]["conv_ms"] for r in range(a.rounds)]
        net.append({"setting": a.settings[k], "alone_sum_ms": sums, "conv_ms": conv, "pass_ms": [runs[k][r]["median_ms"] for r in range(a.rounds)],
                    "peak_gflops": [runs[k][r]["peak_gflops"] for r in range(a.rounds)],
                    "alone_vs_inside": spread([x / y for x, y in zip(sums, conv)])})
    for k in S:
        for key in ("alone_sum_ms", "conv_ms", "pass_ms"):
            net[k][key + "_vs_first"] = spread([x / y for x, y in zip(net[k][key], net[0][key])])

    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    L = [f"# {a.network}: convolutions timed alone against inside the network", "",
         f"Generated {now} by `bench/alone_vs_network/run.sh` at commit {a.commit} on {a.cpu}, {a.cores} cores; mtgpu through PoCL's CPU device; configs: {a.db}.", "",
         f"Regenerate: `{a.command}`", "",
         f"Each round, for each setting in turns (the order rotating): `mtgpu run {a.network} --profile` ({a.repeat} passes; each layer's device time in the median pass), "
         "then every task alone with `mtgpu conv WL --template T --config C --cold` (its weights evicted before each timed run, as `mtgpu tune` measures). "
         f"{a.rounds} rounds; ratios between settings are taken within a round, tables give the median and range over the rounds.", "",
         "| setting | convolutions alone, summed ms | inside the network ms | alone / inside | pass ms | alone vs first setting | inside vs first | pass vs first | FMA peak GFLOP/s |",
         "|---|---|---|---|---|---|---|---|---|"]
    for n in net:
        L.append(f"| `{n['setting']}` | {statistics.median(n['alone_sum_ms']):.2f} | {statistics.median(n['conv_ms']):.2f} | {fmt(n['alone_vs_inside'])} | "
                 f"{statistics.median(n['pass_ms']):.2f} | {fmt(n['alone_sum_ms_vs_first'])} | {fmt(n['conv_ms_vs_first'])} | {fmt(n['pass_ms_vs_first'])} | "
                 f"{statistics.median(n['peak_gflops']):.0f} |")
    if failed:
        L += ["", "Failed alone: " + "; ".join(failed)]
    L += ["", "Per task (a strided 1x1 layer runs as the stride-1 convolution of its subsampled input): ms alone and per layer inside the network, medians over the rounds.", ""]
    head = "| workload | layers | template |" + "".join(f" alone `{s}` | inside | alone / inside |" for s in a.settings)
    L += [head, "|---|---|---|" + "---|---|---|" * len(a.settings)]
    for row in rows:
        cells = "".join(f" {c['alone_ms'] or 0:.3f} | {c['inside_ms'] or 0:.3f} | {fmt(c['alone_vs_inside'])} |" for c in row["settings"])
        L.append(f"| `{row['workload']}` | {row['count']} | {row['template']} |{cells}")
    open(a.out + ".md", "w").write("\n".join(L) + "\n")
    json.dump({"network": a.network, "commit": a.commit, "cpu": a.cpu, "cores": a.cores, "generated": now, "command": a.command,
               "rounds": a.rounds, "repeat": a.repeat, "settings": a.settings, "network_sums": net, "tasks": rows, "failed": failed},
              open(a.out + ".json", "w"), indent=1)
    print("\n".join(L[:12 + len(net)]))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
