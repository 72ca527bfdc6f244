#!/usr/bin/env python3
"""Report of bench/layers_vs_onednn/run.sh: mtgpu's in-network profile against
oneDNN's, layer by layer, by class of convolution and for all convolutions.
Every ratio is taken within one round (both sides in one window of the
machine), then the median and range over the rounds are given. Writes
NAME.md and NAME.json."""
import argparse
import datetime
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from benchlib import conv_class, fmt_spread, profile_words, spread  # noqa: E402


def load(path):
    with open(path) as f:
        return json.load(f)


def direct_flop(workload):
    """2 x outputs x c/groups x r x s, whatever the algorithm (mt_workload_flops)."""
    kv = dict(p.split("=") for p in workload.split(","))
    sh, sw = (int(x) for x in (kv.get("stride", "1") + "x" + kv.get("stride", "1")).split("x")[:2])
    ph, pw = (int(x) for x in (kv.get("pad", "0") + "x" + kv.get("pad", "0")).split("x")[:2])
    n, c, h, w, k, r, s = (int(kv[x]) if x in kv else 1 for x in ("n", "c", "h", "w", "k", "r", "s"))
    dh, dw = (int(x) for x in (kv.get("dilation", "1") + "x" + kv.get("dilation", "1")).split("x")[:2])
    oh, ow = (h + 2 * ph - dh * (r - 1) - 1) // sh + 1, (w + 2 * pw - dw * (s - 1) - 1) // sw + 1
    return 2.0 * n * k * oh * ow * (c // int(kv.get("groups", "1"))) * r * s


def main():
    ap = argparse.ArgumentParser()
    for a in ("--work", "--network", "--db", "--cpu", "--commit", "--out", "--name"):
        ap.add_argument(a, required=True)
    ap.add_argument("--rounds", type=int, required=True)
    ap.add_argument("--repeat", type=int, required=True)
    ap.add_argument("--cores", type=int, required=True)
    a = ap.parse_args()

    ours = [load(os.path.join(a.work, f"mtgpu.{r}.json")) for r in range(a.rounds)]
    theirs = [load(os.path.join(a.work, f"onednn.{r}.json")) for r in range(a.rounds)]
    dnn_ms = [{l["name"]: l["ms"] for l in t["layers"]} for t in theirs]
    convs = [l for l in ours[0]["layers"] if l["kind"] == "conv2d"]
    peak = [o["peak_gflops"] for o in ours]

    layers, classes = [], {}
    for l in convs:
        name = l["name"]
        o = [next(x for x in r["layers"] if x["name"] == name)["ms"] for r in ours]
        d = [m.get(name) for m in dnn_ms]
        flop = direct_flop(l["workload"])
        cls = conv_class(l)
        row = {"layer": name, "class": cls, "workload": l["workload"], "template": l["template"], "config": l["config"],
               "mtgpu_ms": statistics.median(o), "onednn_ms": statistics.median([x for x in d if x]) if any(d) else None,
               "ratio": spread([oi / di for oi, di in zip(o, d) if di]), "flop": flop}
        row["mtgpu_peak_fraction"] = statistics.median(flop / (oi * 1e6) / p for oi, p in zip(o, peak))
        row["onednn_peak_fraction"] = statistics.median(flop / (di * 1e6) / p for di, p in zip(d, peak) if di) if any(d) else None
        layers.append(row)
        c = classes.setdefault(cls, {"class": cls, "layers": 0, "flop": 0.0, "o": [0.0] * a.rounds, "d": [0.0] * a.rounds})
        c["layers"] += 1
        c["flop"] += flop or 0.0
        for r in range(a.rounds):
            c["o"][r] += o[r]
            c["d"][r] += d[r] or 0.0

    def summary(o, d, flop):
        return {"mtgpu_ms": statistics.median(o), "onednn_ms": statistics.median(d),
                "ratio": spread([oi / di for oi, di in zip(o, d) if di]),
                "mtgpu_peak_fraction": statistics.median(flop / (oi * 1e6) / p for oi, p in zip(o, peak)) if flop else None,
                "onednn_peak_fraction": statistics.median(flop / (di * 1e6) / p for di, p in zip(d, peak) if di) if flop else None,
                "gap_ms": statistics.median(oi - di for oi, di in zip(o, d))}

    class_rows = []
    for c in classes.values():
        s = summary(c["o"], c["d"], c["flop"])
        s.update({"class": c["class"], "layers": c["layers"], "gflop": c["flop"] / 1e9})
        class_rows.append(s)
    class_rows.sort(key=lambda s: -s["gap_ms"])
    conv_o = [sum(c["o"][r] for c in classes.values()) for r in range(a.rounds)]
    conv_d = [sum(c["d"][r] for c in classes.values()) for r in range(a.rounds)]
    total_flop = sum(c["flop"] for c in classes.values())
    conv_sum = summary(conv_o, conv_d, total_flop)
    other_o = [sum(x["ms"] for x in r["layers"] if x["kind"] not in ("conv2d", "input")) for r in ours]
    other_d = [sum(x["ms"] for x in t["layers"] if x["kind"] != "conv2d") for t in theirs]
    other = {"mtgpu_ms": statistics.median(other_o), "onednn_ms": statistics.median(other_d)}

    res = {"network": a.network, "database": a.db, "commit": a.commit, "cpu": a.cpu, "cores": a.cores, "rounds": a.rounds,
           "repeat": a.repeat, "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "peak_gflops": peak, "convolutions": conv_sum, "other_ops": other, "classes": class_rows, "layers": layers,
           "onednn_version": theirs[0].get("version"), "omp_wait_policy": theirs[0].get("omp_wait_policy")}
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, a.name + ".json"), "w") as f:
        json.dump(res, f, indent=1)

    pct = lambda x: "-" if x is None else f"{100 * x:.0f}%"
    md = [f"# {a.network}: mtgpu against oneDNN layer by layer, inside the network\n",
          f"Generated {res['date']} by `bench/layers_vs_onednn/run.sh` at commit {a.commit} on {a.cpu}, {a.cores} cores; "
          f"oneDNN {res['onednn_version']} (blocked layouts, OMP_WAIT_POLICY={res['omp_wait_policy'] or 'unset'}); mtgpu through PoCL's CPU device; "
          f"database: {a.db}.\n",
          f"Each round: `mtgpu run {a.network} --profile` (median of {a.repeat} passes, {profile_words(ours[0] if ours else None)}) and `bench_onednn_net {a.network} --profile` (median of {a.repeat} passes, each "
          f"primitive executed and waited for alone, reorders counted for the layer that needs them), {a.rounds} rounds, the order "
          "alternating. A ratio (mtgpu / oneDNN, above 1: mtgpu slower) is taken within a round; the tables give its median "
          "and range over the rounds. Fractions of peak: direct-convolution FLOPs over the FMA peak `mtgpu run --profile` "
          f"measured in the same round ({min(peak):.0f}-{max(peak):.0f} GFLOP/s).\n",
          "| | mtgpu ms | oneDNN ms | mtgpu / oneDNN | mtgpu of peak | oneDNN of peak |", "|---|---|---|---|---|---|",
          f"| convolutions | {conv_sum['mtgpu_ms']:.2f} | {conv_sum['onednn_ms']:.2f} | {fmt_spread(conv_sum['ratio'])} | "
          f"{pct(conv_sum['mtgpu_peak_fraction'])} | {pct(conv_sum['onednn_peak_fraction'])} |",
          f"| other operations | {other['mtgpu_ms']:.2f} | {other['onednn_ms']:.2f} | | | |", "",
          "By class of convolution, largest gap (mtgpu ms - oneDNN ms) first:\n",
          "| class (mtgpu) | layers | GFLOP | mtgpu ms | oneDNN ms | gap ms | mtgpu / oneDNN | mtgpu of peak | oneDNN of peak |",
          "|---|---|---|---|---|---|---|---|---|"]
    for s in class_rows:
        md.append(f"| {s['class']} | {s['layers']} | {s['gflop']:.2f} | {s['mtgpu_ms']:.2f} | {s['onednn_ms']:.2f} | "
                  f"{s['gap_ms']:+.2f} | {fmt_spread(s['ratio'])} | {pct(s['mtgpu_peak_fraction'])} | {pct(s['onednn_peak_fraction'])} |")
    md += ["", "| layer | workload | mtgpu kernel | mtgpu ms | oneDNN ms | mtgpu / oneDNN | mtgpu of peak | oneDNN of peak |",
           "|---|---|---|---|---|---|---|---|"]
    for l in layers:
        md.append(f"| {l['layer']} | `{l['workload']}` | {l['template']} | {l['mtgpu_ms']:.3f} | "
                  f"{'-' if l['onednn_ms'] is None else format(l['onednn_ms'], '.3f')} | {fmt_spread(l['ratio'])} | "
                  f"{pct(l.get('mtgpu_peak_fraction'))} | {pct(l.get('onednn_peak_fraction'))} |")
    md += ["", f"Regenerate: `bench/layers_vs_onednn/run.sh [DB]` (NETWORK={a.network}, ROUNDS={a.rounds}, REPEAT={a.repeat})."]
    with open(os.path.join(a.out, a.name + ".md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md[3:7 + len(class_rows) + 5]))


if __name__ == "__main__":
    main()
