#!/usr/bin/env python3
"""Report of bench/core_scaling/run.sh: per layer of the network, its time
inside the passes on one thread and on all of them, for mtgpu (PoCL's worker
threads) and oneDNN (OpenMP's), the speed-up and the time beyond an even
split (all-threads time less one-thread time / cores), each taken within a
round, then the median and range over the rounds. Writes NAME.md and
NAME.json."""
import argparse
import datetime
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from benchlib import conv_class, fmt_spread, spread  # noqa: E402

LIBS = {"mtgpu": ("one", "all"), "oneDNN": ("onednn-one", "onednn-all")}


def main():
    ap = argparse.ArgumentParser()
    for a in ("raw", "out", "network", "db", "cpu", "commit", "command"):
        ap.add_argument("--" + a, required=True)
    for a in ("rounds", "repeat", "cores"):
        ap.add_argument("--" + a, type=int, required=True)
    a = ap.parse_args()
    R = range(a.rounds)
    n = a.cores
    runs = {s: [json.load(open(os.path.join(a.raw, f"{s}-{r}.json"))) for r in R] for pair in LIBS.values() for s in pair}
    layers = [l for l in runs["all"][0]["layers"] if l["kind"] != "input"]
    for s in runs:
        for run in runs[s]:
            names = {l["name"] for l in run["layers"]}
            if s in LIBS["mtgpu"] and names != {l["name"] for l in runs["all"][0]["layers"]}:
                sys.exit("core_scaling: mtgpu's runs profiled different layers")
    # Per side and round: layer name -> ms (oneDNN's profile names its layers as mtgpu's).
    ms = {s: [{l["name"]: l["ms"] for l in run["layers"]} for run in runs[s]] for s in runs}

    def scaling(lib, names):
        """One- and all-thread time of the named layers, summed per round;
        None where the library's profile lacks one of them."""
        one_s, all_s = LIBS[lib]
        if any(name not in ms[s][r] for s in (one_s, all_s) for r in R for name in names):
            return None
        one = [sum(ms[one_s][r][x] for x in names) for r in R]
        all_ = [sum(ms[all_s][r][x] for x in names) for r in R]
        return {"one_ms": statistics.median(one), "all_ms": statistics.median(all_),
                "speedup": spread([x / y for x, y in zip(one, all_) if y]),
                "beyond_split_ms": spread([y - x / n for x, y in zip(one, all_)])}

    def row(key, names, count):
        out = {"group": key, "layers": count}
        for lib in LIBS:
            out[lib] = scaling(lib, names)
        return out

    rows = [dict(row(l["name"], [l["name"]], 1), workload=l.get("workload"), kernel=l.get("template", l["kind"]),
                 cls=conv_class(l) if l["kind"] == "conv2d" else l["kind"]) for l in layers]
    groups = {}
    for l, r_ in zip(layers, rows):
        groups.setdefault(r_["cls"], []).append(l["name"])
    classes = sorted((row(k, v, len(v)) for k, v in groups.items()), key=lambda g: -g["mtgpu"]["beyond_split_ms"][0])
    convs = [l["name"] for l in layers if l["kind"] == "conv2d"]
    total = row("convolutions", convs, len(convs))
    wall = {lib: spread([runs[o][r]["median_ms"] / runs[al][r]["median_ms"] for r in R]) for lib, (o, al) in LIBS.items()}
    wall_ms = {s: statistics.median(runs[s][r]["median_ms"] for r in R) for s in runs}

    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    res = {"generated": now, "commit": a.commit, "cpu": a.cpu, "cores": n, "network": a.network, "database": a.db,
           "rounds": a.rounds, "repeat": a.repeat, "command": a.command, "wall_ms": wall_ms, "wall_speedup": wall,
           "convolutions": total, "classes": classes, "layers": rows}
    with open(a.out + ".json", "w") as f:
        json.dump(res, f, indent=1)

    def cells(s, per=1, spec=".3f"):
        if not s:
            return "- | - | - | -"
        return (f"{s['one_ms']:{spec}} | {s['all_ms']:{spec}} | {fmt_spread(s['speedup'])} | "
                f"{s['beyond_split_ms'][0] * 1e3 / per:.1f}")

    m, o = total["mtgpu"], total["oneDNN"]
    L = [f"# {a.network}: what its layers get of every core", "",
         f"Generated {now} by `bench/core_scaling/run.sh` at commit {a.commit} on {a.cpu}, {n} cores; "
         f"mtgpu through PoCL's CPU device (database: {a.db}); oneDNN {runs['onednn-all'][0].get('version', '?')} "
         "(blocked layouts, OpenMP's defaults).", "",
         f"Regenerate: `{a.command}`", "",
         f"Each round, in turns: `mtgpu run {a.network} --profile` with PoCL on one worker thread (`one`) and on its default, "
         f"one per core (`all`); `bench_onednn_net {a.network} --profile` with `OMP_NUM_THREADS=1` and at OpenMP's defaults; "
         f"{a.rounds} rounds, each profile the median of {a.repeat} passes. Speed-up: one / all within a round. "
         f"Beyond an even split: all less one / {n}, the time a layer takes beyond its one-thread work divided evenly over "
         "the cores (threads starting it late, uneven shares, shared caches). Medians over the rounds, ranges in brackets.", "",
         "| | mtgpu one ms | mtgpu all ms | mtgpu speed-up | oneDNN one ms | oneDNN all ms | oneDNN speed-up |",
         "|---|---|---|---|---|---|---|",
         f"| whole pass (wall) | {wall_ms['one']:.2f} | {wall_ms['all']:.2f} | {fmt_spread(wall['mtgpu'])} | "
         f"{wall_ms['onednn-one']:.2f} | {wall_ms['onednn-all']:.2f} | {fmt_spread(wall['oneDNN'])} |"]
    if m and o:
        L.append(f"| {len(convs)} convolutions | {m['one_ms']:.2f} | {m['all_ms']:.2f} | {fmt_spread(m['speedup'])} | "
                 f"{o['one_ms']:.2f} | {o['all_ms']:.2f} | {fmt_spread(o['speedup'])} |")
        L += ["", f"Beyond an even split, the convolutions: mtgpu {m['beyond_split_ms'][0]:.2f} ms "
              f"({m['beyond_split_ms'][0] * 1e3 / len(convs):.1f} us per layer), oneDNN {o['beyond_split_ms'][0]:.2f} ms "
              f"({o['beyond_split_ms'][0] * 1e3 / len(convs):.1f} us per layer). Split evenly, mtgpu's would take "
              f"{m['one_ms'] / n:.2f} ms against oneDNN's {o['all_ms']:.2f} as it runs."]
    hdr = "one ms | all ms | speed-up | beyond, us"
    L += ["", "By class (us beyond an even split per layer), largest loss of mtgpu's first:", "",
          f"| class | layers | mtgpu {hdr} | oneDNN {hdr} |", "|---|---|---|---|---|---|---|---|---|---|"]
    for g in classes:
        L.append(f"| {g['group']} | {g['layers']} | {cells(g['mtgpu'], g['layers'])} | {cells(g['oneDNN'], g['layers'])} |")
    L += ["", f"| layer | workload | mtgpu kernel | mtgpu {hdr} | oneDNN {hdr} |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r_ in rows:
        wl = f"`{r_['workload']}`" if r_["workload"] else "-"
        L.append(f"| {r_['group']} | {wl} | {r_['kernel']} | {cells(r_['mtgpu'], 1, '.4f')} | {cells(r_['oneDNN'], 1, '.4f')} |")
    with open(a.out + ".md", "w") as f:
        f.write("\n".join(L) + "\n")
    print("\n".join(L[:14]))


if __name__ == "__main__":
    main()
