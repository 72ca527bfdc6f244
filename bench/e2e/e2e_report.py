#!/usr/bin/env python3
"""Tables and a plot from the per-pair results of bench/e2e/run.sh.

    python3 bench/e2e/e2e_report.py [--work DIR] [--out DIR] [--nets N...] [--models M...]

Reads WORK/<network>/{default,<model>,onednn_any,onednn_nchw,onednn_check}.json
(default WORK: OUT/e2e, OUT: bench/e2e/results) and writes OUT/e2e.md (a table per
network), OUT/e2e.json (every number) and OUT/e2e.png (latency per network and
cost model, with oneDNN's). Without --nets/--models, every network directory and
model result found is used. Missing results show as "-". The PNG needs
matplotlib (bench/common/setup.sh installs python3-matplotlib); without it the tables
are still written.
"""
import argparse
import json
import os
import sys
import time

MIB = 1048576.0
# The goal: tuned ResNet-50 on the OpenCL device within this factor of oneDNN.
GOAL_NET, GOAL_RATIO = "resnet50", 1.5
MODEL_ORDER = ["default", "random", "xgb", "gnn", "gnn-shared", "mlp"]


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def fmt(x, spec=".1f", none="-"):
    return none if x is None else format(x, spec)


def ratio(a, b):
    return a / b if a and b else None


def row_of(pair, dnnl):
    run = pair["run"]
    tune = pair.get("tune")
    bound = run["weight_bytes"] + run["two_largest_activation_bytes"] + run["workspace_bytes"]
    any_ms = dnnl["any"]["median_ms"] if dnnl.get("any") else None
    nchw_ms = dnnl["nchw"]["median_ms"] if dnnl.get("nchw") else None
    return {
        "cost_model": pair["cost_model"],
        "trials_budget": pair.get("trials"),
        "trials_done": tune["trials_done"] if tune else 0,
        "failed_measurements": pair.get("failed_measurements"),
        "tune_wall_s": tune["wall_s"] if tune else None,
        "refine_wall_s": (pair.get("refine") or {}).get("wall_s"),
        "refine_stored": (pair.get("refine") or {}).get("stored"),
        "tune_process_wall_s": pair.get("tune_process_wall_s"),
        "timed_out": bool(tune and tune.get("timed_out")),
        "interrupted": bool(tune and tune.get("interrupted")),
        "tuned_conv_ms": (tune["network_ms"] or None) if tune else None,
        "median_ms": run["median_ms"],
        "min_ms": run["min_ms"],
        "convs": run["convs"],
        "convs_tuned": run["convs_tuned"],
        "onednn_any_ms": any_ms,
        "onednn_nchw_ms": nchw_ms,
        "ratio_any": ratio(run["median_ms"], any_ms),
        "ratio_nchw": ratio(run["median_ms"], nchw_ms),
        "peak_device_bytes": run["peak_device_bytes"],
        "weight_bytes": run["weight_bytes"],
        "activation_bytes": run["activation_bytes"],
        "workspace_bytes": run["workspace_bytes"],
        "two_largest_activation_bytes": run["two_largest_activation_bytes"],
        "largest_live_bytes": run["largest_live_bytes"],
        "memory_bound_bytes": bound,
        "meets_memory_bound": run["peak_device_bytes"] <= bound,
        "device": run.get("device_name"),
        "kernel_caches": pair.get("kernel_caches"),
        "run_remeasured": pair.get("run_remeasured"),
    }


def collect(work, nets, models):
    if not nets:
        nets = sorted(d for d in os.listdir(work) if os.path.isdir(os.path.join(work, d))) if os.path.isdir(work) else []
    result = {}
    for net in nets:
        d = os.path.join(work, net)
        dnnl = {lay: load(os.path.join(d, f"onednn_{lay}.json")) for lay in ("any", "nchw")}
        check = load(os.path.join(d, "onednn_check.json"))
        names = ["default"] + list(models or [])
        if not models and os.path.isdir(d):
            found = [f[:-5] for f in os.listdir(d) if f.endswith(".json") and not f.startswith("onednn_") and f != "default.json"]
            names += sorted(found, key=lambda m: (MODEL_ORDER.index(m) if m in MODEL_ORDER else len(MODEL_ORDER), m))
        rows, missing = [], []
        for m in names:
            pair = load(os.path.join(d, f"{m}.json"))
            if pair:
                rows.append(row_of(pair, dnnl))
            else:
                missing.append(m)
        result[net] = {"onednn": dnnl, "onednn_check": check, "rows": rows, "missing": missing}
    return result


def write_md(path, res, settings):
    L = ["# End-to-end: whole-network inference after tuning, per cost model, against oneDNN\n"]
    L.append(f"Generated {settings['date']} by `bench/e2e/run.sh` (`bench/e2e/e2e_report.py`). For each network and cost model: "
             "`mtgpu tune NET --trials T --cost-model M --db <fresh>` (compiled-kernel caches empty at the start unless noted), "
             "then `mtgpu run NET --db <that database> --json`; the `default` row runs the default config of every convolution "
             "(no database). oneDNN: `bench_onednn_net NET` runs the same network with the same weights (batch norm folded) on the CPU, "
             "fp32, batch 1, 224x224: `any` = oneDNN's blocked layouts with fused post-ops (sum, ReLU/clip), `nchw` = plain layouts; "
             "its output matches `mt_network_reference` at 32x32 (the check column).\n")
    L.append("Latency: median wall time of whole forward passes after warm-up. Ratio: mtgpu / oneDNN (above 1: mtgpu slower). "
             "Memory: the executor's peak device memory, against the bound weights + the two largest activations + "
             "kernel workspace (all from `mtgpu run --json`). Tuning wall: the tuner's own time (`wall_s`); trials: measurements done "
             "of the budget (a run stopped by the time limit is marked). Refine: the in-network choice `mtgpu tune` ends with "
             "(`mtgpu refine`: each convolution's 3 fastest records and its default config timed inside the network), its wall time "
             "and the number of convolution workloads whose kept config is not the fastest record (- where the tune predates it).\n")
    again = sorted({x["run_remeasured"] for r in res.values() for x in r["rows"] if x.get("run_remeasured")})
    if again:
        L.append(f"Latencies of the tuned rows were measured again after tuning (`REMEASURE=1 bench/e2e/run.sh`, {again[0]}"
                 + (f" to {again[-1]}" if len(again) > 1 else "") + "), back to back with oneDNN and the default configs, so "
                 "the latencies of one network come from one window of the machine; tuning figures are from the tuning runs.\n")
    goal = None
    for net, r in res.items():
        dn = r["onednn"]
        ck = r["onednn_check"]
        any_ = dn.get("any") or {}
        nchw = dn.get("nchw") or {}
        dev = next((x["device"] for x in r["rows"] if x.get("device")), None)
        L.append(f"## {net}\n")
        bits = []
        if dev:
            bits.append(f"mtgpu device: {dev}")
        if any_ or nchw:
            od = any_ or nchw
            bits.append(f"oneDNN {od.get('version')} ({od.get('isa')}, OMP_NUM_THREADS={od.get('omp_num_threads') or 'unset'}, "
                        f"OMP_WAIT_POLICY={od.get('omp_wait_policy') or 'unset'}): "
                        f"any {fmt(any_.get('median_ms'), '.2f')} ms, nchw {fmt(nchw.get('median_ms'), '.2f')} ms "
                        f"(median of {od.get('repeat')}; min {fmt(any_.get('min_ms'), '.2f')} / {fmt(nchw.get('min_ms'), '.2f')} ms); "
                        f"oneDNN memory (any): weights {fmt((any_.get('weight_bytes') or 0) / MIB)} MiB + activations "
                        f"{fmt((any_.get('activation_bytes') or 0) / MIB)} MiB")
        else:
            bits.append("oneDNN: not run")
        if ck:
            bits.append(f"check at {ck.get('image_size')}x{ck.get('image_size')}: max relative error {ck.get('max_rel_err'):.2g} "
                        f"({'ok' if ck.get('passed') else 'FAILED'}, tolerance {ck.get('tolerance'):g})")
        L.append("; ".join(bits) + ".\n")
        L.append("| cost model | trials | tuning wall s | refine s (kept) | mtgpu ms | oneDNN any ms | ratio any | oneDNN nchw ms "
                 "| ratio nchw | peak MiB | bound MiB | within bound |")
        L.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for x in r["rows"]:
            if x["cost_model"] == "default":
                trials = "0 (default configs)"
            else:
                trials = f"{x['trials_done']} / {x['trials_budget']}"
                if x["timed_out"]:
                    trials += " (time limit)"
                if x["interrupted"]:
                    trials += " (interrupted)"
            refine = "-" if x.get("refine_wall_s") is None else f"{x['refine_wall_s']:.0f} ({x['refine_stored']})"
            L.append(f"| {x['cost_model']} | {trials} | {fmt(x['tune_wall_s'], '.0f')} | {refine} | {fmt(x['median_ms'], '.2f')} | "
                     f"{fmt(x['onednn_any_ms'], '.2f')} | {fmt(x['ratio_any'], '.2f')} | {fmt(x['onednn_nchw_ms'], '.2f')} | "
                     f"{fmt(x['ratio_nchw'], '.2f')} | {x['peak_device_bytes'] / MIB:.1f} | {x['memory_bound_bytes'] / MIB:.1f} | "
                     f"{'yes' if x['meets_memory_bound'] else 'no'} |")
        if r["missing"]:
            L.append(f"\nNo result yet for: {', '.join(r['missing'])}.")
        L.append("")
        if net == GOAL_NET:
            tuned = [x for x in r["rows"] if x["cost_model"] != "default" and x["ratio_any"]]
            if tuned:
                best = min(tuned, key=lambda x: x["ratio_any"])
                goal = (best["cost_model"], best["ratio_any"])
    if goal:
        L.append(f"Goal (tuned {GOAL_NET} within {GOAL_RATIO}x of oneDNN's blocked layouts): best {goal[1]:.2f}x ({goal[0]}): "
                 f"{'met' if goal[1] <= GOAL_RATIO else 'not met'}.\n")
    with open(path, "w") as f:
        f.write("\n".join(L))


def write_png(path, res):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("e2e_report.py: matplotlib is missing (bench/common/setup.sh installs it): no PNG", file=sys.stderr)
        return False
    nets = [n for n, r in res.items() if r["rows"] or r["onednn"].get("any") or r["onednn"].get("nchw")]
    if not nets:
        return False
    fig, axes = plt.subplots(1, len(nets), figsize=(max(6.0, 4.2 * len(nets)), 4.4), squeeze=False)
    colors = {"default": "tab:gray", "random": "tab:olive", "xgb": "tab:blue", "gnn": "tab:red", "gnn-shared": "tab:purple",
              "mlp": "tab:brown"}
    for ax, net in zip(axes[0], nets):
        r = res[net]
        labels, values, cols, hatches = [], [], [], []
        for i, x in enumerate(r["rows"]):
            labels.append(x["cost_model"])
            values.append(x["median_ms"])
            cols.append(colors.get(x["cost_model"], f"C{i}"))
            hatches.append("")
        for lay, col in (("any", "tab:green"), ("nchw", "tab:cyan")):
            od = r["onednn"].get(lay)
            if od:
                labels.append(f"oneDNN\n{lay}")
                values.append(od["median_ms"])
                cols.append(col)
                hatches.append("//")
        bars = ax.bar(range(len(values)), values, color=cols, hatch=None)
        for b, h in zip(bars, hatches):
            b.set_hatch(h)
        for b, v in zip(bars, values):
            ax.annotate(f"{v:.0f}" if v >= 10 else f"{v:.1f}", (b.get_x() + b.get_width() / 2, v), ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(values)))
        ax.set_xticklabels(labels, fontsize=8, rotation=0)
        ax.set_title(net)
        ax.set_ylabel("latency, ms (median)")
        ax.set_ylim(bottom=0, top=max(values) * 1.15 if values else 1)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("Whole-network latency after tuning, per cost model\n(mtgpu on its OpenCL device; oneDNN on the CPU, hatched)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="bench/e2e/results")
    ap.add_argument("--work", default=None)
    ap.add_argument("--nets", nargs="*", default=None)
    ap.add_argument("--models", nargs="*", default=None)
    a = ap.parse_args()
    work = a.work or os.path.join(a.out, "e2e")
    res = collect(work, a.nets, a.models)
    if not any(r["rows"] for r in res.values()):
        sys.exit(f"e2e_report.py: no results under {work}")
    settings = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "work": work}
    os.makedirs(a.out, exist_ok=True)
    write_md(os.path.join(a.out, "e2e.md"), res, settings)
    with open(os.path.join(a.out, "e2e.json"), "w") as f:
        json.dump({"date": settings["date"], "goal": {"network": GOAL_NET, "ratio": GOAL_RATIO}, "networks": res}, f, indent=1)
    png = write_png(os.path.join(a.out, "e2e.png"), res)
    for net, r in res.items():
        for x in r["rows"]:
            print(f"{net:13s} {x['cost_model']:10s} trials {x['trials_done']:4d}  tune {fmt(x['tune_wall_s'], '6.0f')} s  "
                  f"mtgpu {x['median_ms']:9.2f} ms  oneDNN any {fmt(x['onednn_any_ms'], '8.2f')} ms (x{fmt(x['ratio_any'], '.2f')})  "
                  f"nchw {fmt(x['onednn_nchw_ms'], '8.2f')} ms  peak {x['peak_device_bytes'] / MIB:7.1f} MiB "
                  f"<= {x['memory_bound_bytes'] / MIB:7.1f}: {'yes' if x['meets_memory_bound'] else 'no'}")
    print(f"e2e_report.py: wrote {a.out}/e2e.md, {a.out}/e2e.json" + (f", {a.out}/e2e.png" if png else ""))


if __name__ == "__main__":
    main()
