#!/usr/bin/env python3
"""Draws the tuning curves of bench_tune_curves.

    python3 bench/tune_curves/plot.py [DIR]          (default bench/tune_curves/results)

Reads DIR/tune_curves.csv (layer,model,seed,trial,gflops_best,...) and writes
DIR/tune_curves.png: one subplot per layer, best GFLOP/s found against the
number of measurements, per cost model the mean over seeds as a line and the
min-max over seeds as a band. A run that stopped before the others keeps its
last best (as in tune_curves.md). Needs matplotlib (bench/common/setup.sh installs
python3-matplotlib).
"""
import csv
import os
import sys
from collections import defaultdict


# Titles for the layers of bench/tune_curves/tune_curves.c; other names are shown as they are.
TITLES = {
    "3x3_64_56": "ResNet-50 3x3 64->64 @56",
    "1x1_256_56": "ResNet-50 1x1 256->64 @56",
    "3x3_256_14": "ResNet-50 3x3 256->256 @14",
}


def load(path):
    # runs[layer][model][seed] = list of best GFLOP/s by trial (index 0 = trial 1)
    runs = defaultdict(lambda: defaultdict(dict))
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            curve = runs[row["layer"]][row["model"]].setdefault(int(row["seed"]), [])
            trial = int(row["trial"])
            while len(curve) < trial - 1:  # tolerate gaps: carry the last value
                curve.append(curve[-1] if curve else 0.0)
            curve.append(float(row["gflops_best"]))
    return runs


def band(curves):
    """Mean, min and max across curves at each trial, carrying short curves forward."""
    n = max(len(c) for c in curves)
    padded = [c + [c[-1]] * (n - len(c)) if c else [0.0] * n for c in curves]
    cols = list(zip(*padded))
    return (list(range(1, n + 1)), [sum(c) / len(c) for c in cols], [min(c) for c in cols], [max(c) for c in cols])


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "bench/tune_curves/results"
    src = os.path.join(outdir, "tune_curves.csv")
    dst = os.path.join(outdir, "tune_curves.png")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot.py: matplotlib is missing (run bench/common/setup.sh, or use the python3 that has it)")
    runs = load(src)
    if not runs:
        sys.exit(f"plot.py: {src} has no rows")
    layers = list(runs)
    fig, axes = plt.subplots(1, len(layers), figsize=(max(6.0, 5.2 * len(layers)), 4.6), squeeze=False)
    colors = {"random": "tab:gray", "xgb": "tab:blue", "gnn": "tab:red"}
    for ax, layer in zip(axes[0], layers):
        for i, (model, seeds) in enumerate(sorted(runs[layer].items())):
            x, mean, lo, hi = band(list(seeds.values()))
            color = colors.get(model, f"C{i + 2}")
            ax.plot(x, mean, color=color, label=f"{model} (mean of {len(seeds)})")
            ax.fill_between(x, lo, hi, color=color, alpha=0.2, linewidth=0)
        ax.set_title(TITLES.get(layer, layer))
        ax.set_xlabel("measurements")
        ax.set_ylabel("best GFLOP/s found")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right")
    fig.suptitle("Tuning curves: best GFLOP/s found vs measurements\n(line: mean over seeds; band: min-max over seeds)", fontsize=10)
    fig.tight_layout()
    fig.savefig(dst, dpi=110)
    print(f"plot.py: wrote {dst}")


if __name__ == "__main__":
    main()
