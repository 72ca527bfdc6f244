#!/usr/bin/env python3
"""How much could tuning gain at most? From the two profiles of one
bench/vs_onednn run (`mtgpu run NET --profile --json` with the default
configs and with the tuned records, the FMA peak measured in each), the
default configs' convolution time against two floors no config can pass:

- every layer not on Winograd at the FMA peak (its direct FLOPs / the
  peak), the Winograd layers at the faster of their default and tuned
  times: what a perfect tuner of the direct templates could reach;
- and every Winograd layer at its multiplication bound as well (F(6x6)'s
  64 multiplications per 36 outputs: 0.198 of direct, transforms free).

Tuning can make the network at most default / floor faster; when that is
under the goal's 1 / 0.85, the goal is out of reach of any search of these
kernels. Usable alone on a results folder (writes headroom.md and .json
there) and imported by report.py."""
import argparse
import json
import os
import sys

# F(6x6, 3x3): (6 + 2)^2 multiplications for 6 x 6 outputs, against 9 each for direct.
WINO_MULT_FRACTION = 64 / (9 * 36)
GOAL_TUNED_VS_DEFAULT = 0.85


def conv_layers(profile):
    return [l for l in profile.get("layers", []) if l.get("kind") == "conv2d"]


def headroom(tuned, default):
    """Floors of the default configs' convolution time, from the tuned and the
    default profile of one network; None without both profiles or a peak."""
    if not tuned or not default:
        return None
    peak = default.get("peak_gflops") or tuned.get("peak_gflops")
    if not peak:
        return None
    tl = {l["name"]: l for l in conv_layers(tuned)}
    default_ms = direct_floor = wino_floor = 0.0
    layers = []
    for d in conv_layers(default):
        t = tl.get(d["name"], d)
        mflop = d["gflops"] * d["ms"]  # direct FLOPs, whatever the algorithm
        at_peak = mflop / peak  # MFLOP / (GFLOP/s) = ms
        wino = "wino" in (d.get("template"), t.get("template"))
        best = min(d["ms"], t["ms"])
        direct_floor += best if wino else at_peak
        wino_floor += at_peak * WINO_MULT_FRACTION if wino else at_peak
        default_ms += d["ms"]
        layers.append({"name": d["name"], "default_ms": d["ms"], "tuned_ms": t["ms"], "wino": wino, "peak_ms": at_peak})
    return {"peak_gflops": peak, "default_ms": default_ms, "tuned_ms": sum(l["tuned_ms"] for l in layers),
            "direct_floor_ms": direct_floor, "wino_floor_ms": wino_floor,
            "direct_layers_default_ms": sum(l["default_ms"] for l in layers if not l["wino"]),
            "direct_layers_peak_ms": sum(l["peak_ms"] for l in layers if not l["wino"]),
            "wino_layers": sum(1 for l in layers if l["wino"]), "layers": len(layers)}


def lines(h):
    """Markdown paragraph on one network's headroom."""
    most = h["direct_floor_ms"] / h["default_ms"]
    return [f"Tuning's headroom (`bench/vs_onednn/headroom.py`): the default configs' convolutions took {h['default_ms']:.2f} ms, "
            f"the tuned ones {h['tuned_ms']:.2f} ({h['tuned_ms'] / h['default_ms']:.2f}x). Its {h['layers'] - h['wino_layers']} "
            f"layers not on Winograd took {h['direct_layers_default_ms']:.2f} ms at the default configs and would take "
            f"{h['direct_layers_peak_ms']:.2f} at the FMA peak ({h['peak_gflops']:.1f} GFLOP/s); with them at the peak and the "
            f"{h['wino_layers']} Winograd layers at the faster of their default and tuned times, the convolutions would take "
            f"{h['direct_floor_ms']:.2f} ms: **no tuning of these layers can bring the network below {most:.2f}x of its default "
            f"configs' convolution time** (the goal asks {GOAL_TUNED_VS_DEFAULT}x; "
            f"{'within reach only with every direct layer at the peak' if most <= GOAL_TUNED_VS_DEFAULT else 'out of reach'}). "
            f"With the Winograd layers at their multiplication bound as well (F(6x6): {WINO_MULT_FRACTION:.3f} of the direct "
            f"FLOPs, transforms free) the floor is {h['wino_floor_ms']:.2f} ms ({h['wino_floor_ms'] / h['default_ms']:.2f}x).", ""]


def load(path):
    return json.load(open(path)) if os.path.exists(path) and os.path.getsize(path) else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", help="a bench/vs_onednn results folder (its raw/NET.profile_{tuned,default}.json)")
    a = ap.parse_args()
    raw = os.path.join(a.results, "raw")
    if not os.path.isdir(raw):
        sys.exit(f"headroom: {a.results} has no raw/ folder (a bench/vs_onednn results folder has one)")
    nets = sorted({f.split(".")[0] for f in os.listdir(raw) if ".profile_" in f})
    out, md = {}, [f"# Tuning's headroom: {a.results.rstrip('/').split('/')[-1]}", "",
                   "From the profiles of that run (`raw/NET.profile_default.json`, `raw/NET.profile_tuned.json`), by "
                   "`bench/vs_onednn/headroom.py " + a.results.rstrip("/") + "`.", ""]
    for net in nets:
        h = headroom(load(os.path.join(raw, f"{net}.profile_tuned.json")), load(os.path.join(raw, f"{net}.profile_default.json")))
        if not h:
            continue
        out[net] = h
        md += [f"## {net}", ""] + lines(h)
    if not out:
        sys.exit(f"headroom: no pair of profiles under {raw}")
    with open(os.path.join(a.results, "headroom.json"), "w") as f:
        json.dump(out, f, indent=1)
    with open(os.path.join(a.results, "headroom.md"), "w") as f:
        f.write("\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()
