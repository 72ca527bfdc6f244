#!/usr/bin/env python3
"""Report of bench/vs_onednn/run.sh: per network, the four sides' latencies
round by round, the ratios within each round (so that every ratio compares
runs of one window of the machine) and their medians over the rounds; then
each convolution of the tuned network against the FMA peak measured in the
same run, and the goals. Writes vs_onednn.md, vs_onednn.json and
vs_onednn_layers.csv."""
import argparse
import csv
import datetime
import glob
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import profile_words, round_ratio, side_rounds  # noqa: E402
from headroom import headroom, lines as headroom_lines  # noqa: E402

SIDES = ["onednn_any", "onednn_nchw", "default", "tuned"]
# Ratio goals to oneDNN's blocked layouts at `mtgpu tune`'s defaults.
GOALS = {"resnet50": 1.0, "resnet18": 1.0, "vgg16": 0.8, "mobilenet_v2": 1.0}


def load(path):
    with open(path) as f:
        return json.load(f)


def kernel_shape(workload):
    """(r, s, stride) of a dense convolution's workload string; grouped ones
    (depthwise) give (0, 0, 0), so no shape test counts them."""
    kv = dict(p.split("=") for p in workload.split(","))
    if int(kv.get("groups", "1")) != 1:
        return 0, 0, 0
    stride = kv.get("stride", "1").split("x")[0]
    return int(kv["r"]), int(kv["s"]), int(stride)


def network(work, db_dir, net, rounds):
    rows = side_rounds(work, net, SIDES, rounds)

    def ratios(a, b):
        return round_ratio(rows, a, b)

    out = {"network": net, "rounds": rows,
           "tuned_vs_any": ratios("tuned", "onednn_any"), "default_vs_any": ratios("default", "onednn_any"),
           "tuned_vs_nchw": ratios("tuned", "onednn_nchw"), "tuned_vs_default": ratios("tuned", "default")}
    tj = os.path.join(db_dir, f"{net}.tune.json")
    tune = load(tj) if os.path.exists(tj) else {}
    out["tune_wall_s"] = tune.get("tune_wall_s")
    out["tune_note"] = tune.get("note", "")
    out["profile_note"] = tune.get("profile_note", "")
    for which in ("tuned", "default"):
        p = os.path.join(work, f"{net}.profile_{which}.json")
        out["profile_" + which] = load(p) if os.path.exists(p) and os.path.getsize(p) else None
    return out


def fmt(x, f="{:.2f}"):
    return "-" if x is None else f.format(x)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--db-dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, required=True)
    ap.add_argument("--repeat", type=int, required=True)
    ap.add_argument("--cpu", default="unknown")
    ap.add_argument("--cores", default="?")
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("nets", nargs="*")
    a = ap.parse_args()
    nets = [network(a.work, a.db_dir, n, a.rounds) for n in a.nets]
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    onednn = None
    for p in sorted(glob.glob(os.path.join(a.work, "*.onednn_any.*.json"))):
        j = load(p)
        onednn = f"oneDNN {j.get('version')} ({j.get('isa')}, OMP_WAIT_POLICY={j.get('omp_wait_policy') or 'unset'})"
        break
    md = [f"# mtgpu against oneDNN on this CPU: whole networks, side by side, against the FMA peak", "",
          f"Generated {now} by `bench/vs_onednn/run.sh` (`bench/vs_onednn/report.py`) at commit {a.commit} on "
          f"{a.cpu}, {a.cores} cores; {onednn or 'oneDNN'}; mtgpu through PoCL's CPU device.", "",
          f"Each network: oneDNN with its blocked layouts (`any`) and plain NCHW, mtgpu with every convolution at its default "
          f"config (`default`, no database) and mtgpu with the records of `mtgpu tune NET` at its defaults (`tuned`: 32 trials "
          f"per task, the gnn-meta cost model, 28-minute limit, then refinement in the network), timed in turns: {a.rounds} "
          f"rounds, the order rotating each round, each the median of {a.repeat} passes after warm-up (batch 1, 224x224, "
          f"fp32). A ratio is taken within a round (one window of this shared machine) and the table gives its median over "
          f"the rounds, with the range. Below 1: mtgpu faster.", ""]
    md += ["| network | oneDNN any ms | oneDNN nchw ms | mtgpu default ms | mtgpu tuned ms | tuned / any | default / any | "
           "tuned / default | goal (tuned / any) | tuning wall s |", "|---|---|---|---|---|---|---|---|---|---|"]
    for n in nets:
        med = {s: statistics.median([r[s] for r in n["rounds"] if r[s]]) if any(r[s] for r in n["rounds"]) else None for s in SIDES}
        def rr(x):
            return "-" if not x else f"{x[0]:.2f} ({x[1]:.2f}-{x[2]:.2f})"
        goal = GOALS.get(n["network"])
        met = "-" if not n["tuned_vs_any"] or goal is None else ("met" if n["tuned_vs_any"][0] <= goal else "not met")
        md.append(f"| {n['network']} | {fmt(med['onednn_any'])} | {fmt(med['onednn_nchw'])} | {fmt(med['default'])} | "
                  f"{fmt(med['tuned'])} | {rr(n['tuned_vs_any'])} | {rr(n['default_vs_any'])} | {rr(n['tuned_vs_default'])} | "
                  f"<= {goal} : {met} | {fmt(n['tune_wall_s'], '{:.0f}')}{' (' + n['tune_note'] + ')' if n['tune_note'] else ''} |")
    md.append("")
    layers_csv = []
    for n in nets:
        pt, pd = n["profile_tuned"], n["profile_default"]
        if not pt:
            continue
        peak = pt.get("peak_gflops")
        md += [f"## {n['network']}: convolutions against the FMA peak", "",
               f"`mtgpu run {n['network']} --profile` (median of {a.repeat} passes, {profile_words(pt)}): the tuned network's "
               f"convolutions took {pt['conv_ms']:.2f} ms for {pt['conv_gflop']:.2f} GFLOP "
               f"({pt['conv_gflop'] / pt['conv_ms'] * 1e3:.1f} GFLOP/s); at the FMA peak measured in the same run "
               f"({fmt(peak, '{:.1f}')} GFLOP/s, FMA chains as wide as the device's vectors on every core) direct convolution would need "
               f"{fmt(pt.get('conv_peak_bound_ms'))} ms." +
               (f" With the default configs: {pd['conv_ms']:.2f} ms (peak {fmt(pd.get('peak_gflops'), '{:.1f}')})." if pd else "") +
               (f" {n['profile_note']}" if n["profile_note"] else "") +
               (f" Inside the tuned network's profiled passes all its layers took {pt['device_ms']:.2f} ms and the threads waited "
                f"{pt['wait_ms']:.3f} ms more for each other at the layers' ends, in passes of {pt['median_ms']:.2f} ms wall: the rest "
                "is the input's upload, the launches and the host's wait" +
                (f" (upload {pt['pass']['upload_ms']:.3f} ms, queueing the first launch {pt['pass']['queue_ms']:.3f}, from there to its "
                 f"first thread's start {pt['pass']['start_ms']:.3f}, the host's return {pt['pass']['return_ms']:.3f}; the other threads "
                 f"started {pt['pass']['late_ms']:.3f} ms late in all)." if pt.get("pass") else ".") if pt.get("profile") == "in_pass" else ""),
               "", "GFLOP/s count a convolution's direct FLOPs (2 x outputs x c x r x s) whatever the algorithm, so a "
               "Winograd kernel can pass 100% of the peak.", "",
               "| layer | workload | kernel (tuned) | tuned ms | GFLOP/s | of peak | default ms | default kernel |",
               "|---|---|---|---|---|---|---|---|"]
        dl = {l["name"]: l for l in (pd or {}).get("layers", [])}
        wino = three_s1 = one = 0
        for l in pt["layers"]:
            if l["kind"] != "conv2d":
                continue
            d = dl.get(l["name"], {})
            r, s, stride = kernel_shape(l["workload"])
            frac = l.get("peak_fraction")
            md.append(f"| {l['name']} | {l['workload']} | {l.get('template', '?')}{'' if l.get('tuned') else ' (default)'} | "
                      f"{l['ms']:.3f} | {l.get('gflops', 0):.1f} | {fmt(frac * 100 if frac else None, '{:.0f}%')} | "
                      f"{fmt(d.get('ms'), '{:.3f}')} | {d.get('template', '-')} |")
            layers_csv.append({"network": n["network"], "layer": l["name"], "workload": l["workload"], "template": l.get("template"),
                               "config": l.get("config"), "tuned": l.get("tuned"), "ms": l["ms"], "gflops": l.get("gflops"),
                               "peak_fraction": frac, "peak_gflops": peak, "default_ms": d.get("ms"), "default_template": d.get("template")})
            wino += l.get("template") == "wino"
            three_s1 += (r, s, stride) == (3, 3, 1)
            one += (r, s) == (1, 1)
        md.append("")
        n["headroom"] = headroom(pt, pd)
        if n["headroom"]:
            md += headroom_lines(n["headroom"])
        if n["network"] == "resnet50" and peak:
            above = [l for l in layers_csv if l["network"] == "resnet50" and kernel_shape(l["workload"]) == (3, 3, 1)]
            ones = [l for l in layers_csv if l["network"] == "resnet50" and kernel_shape(l["workload"])[:2] == (1, 1)]
            md += [f"3x3 stride-1 layers above the direct FMA bound (over 100% of peak): "
                   f"{sum(1 for l in above if (l['peak_fraction'] or 0) > 1)} of {len(above)}; "
                   f"1x1 layers at 75% of peak or more: {sum(1 for l in ones if (l['peak_fraction'] or 0) >= 0.75)} of {len(ones)}; "
                   f"Winograd kernels in the tuned network: {wino} of {three_s1} 3x3 stride-1 layers.", ""]
        else:
            md += [f"Winograd kernels in the tuned network: {wino} of {three_s1} 3x3 stride-1 layers.", ""]
    md += ["Regenerate: `bench/vs_onednn/run.sh` (tunes the networks without a database first: up to 28 minutes each).", ""]
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "vs_onednn.md"), "w") as f:
        f.write("\n".join(md))
    with open(os.path.join(a.out, "vs_onednn.json"), "w") as f:
        json.dump({"generated": now, "commit": a.commit, "cpu": a.cpu, "cores": a.cores, "rounds": a.rounds, "repeat": a.repeat,
                   "networks": nets}, f, indent=1)
    if layers_csv:
        with open(os.path.join(a.out, "vs_onednn_layers.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(layers_csv[0].keys()))
            w.writeheader()
            w.writerows(layers_csv)
    print("\n".join(md))


if __name__ == "__main__":
    main()
