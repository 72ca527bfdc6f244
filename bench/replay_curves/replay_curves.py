#!/usr/bin/env python3
"""Search efficiency per cost model on held-out convolutions, in replay
(bench/replay_curves/run.sh drives it).

    python3 bench/replay_curves/replay_curves.py --mtgpu BUILD/mtgpu --db DB --holdout "resnet18;squeezenet1_1"
        --models "random xgb gnn gnn-transfer gnn-meta" --seeds 20 --trials 64
        --meta-model M --transfer-model T --out DIR --command CMD

Every held-out convolution with records in DB (of the device with the most
records) is tuned by every cost model and seed with `mtgpu tune --simulate
DB --no-db`: the search may only propose configs recorded for the
convolution, each answered with its recorded time, so a run takes seconds
and the same recording serves every model and seed. All of the
convolution's templates are tuned together (the scheduler shares the
budget among them), from the searches alone (`start_from_default` is the
tuner's: the default config first when it was recorded).

The optimum of a convolution is its fastest recorded config. After t trials
a run has reached optimum_ms / best_ms_found (1.0: it found the optimum).
The report gives, per model, the mean of that over convolutions and seeds
at t = 4, 8, 16, 32, 64 trials, and the median number of trials to reach
95% of the optimum.

The model files must have been trained with every held-out convolution out
of their training tasks (their manifests are checked).

Writes DIR/replay_curves.md, DIR/replay_curves.csv (per run, the trials
where its best time changed, and its last) and DIR/replay_curves.png where
matplotlib is there.
"""
import argparse
import csv
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import benchlib  # noqa: E402

CHECKPOINTS = [4, 8, 16, 32, 64, 128, 200]


log = benchlib.logger("replay_curves")


def recorded(db, workloads):
    c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    fp = c.execute("SELECT device FROM records WHERE status = 'ok' GROUP BY device ORDER BY count(*) DESC LIMIT 1").fetchone()[0]
    rows = c.execute("SELECT w.text, min(r.median_ms), count(*) FROM records r JOIN workloads w ON w.id = r.workload_id "
                     "WHERE r.device = ? AND r.status = 'ok' AND r.median_ms > 0 GROUP BY w.text", (fp,)).fetchall()
    c.close()
    return fp, {w: (best, n) for w, best, n in rows if w in workloads}


def run_one(args, wl, model, seed, fp):
    cmd = [args.mtgpu, "tune", wl, "--simulate", args.db, "--simulate-device", fp, "--no-db", "--trials", str(args.trials),
           "--early-stop", "0", "--seed", str(seed), "--json", "--cost-model", model]
    if model == "gnn-meta":
        cmd += ["--model", args.meta_model]
    elif model == "gnn-transfer":
        cmd += ["--model", args.transfer_model]
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.time() - t0
    if p.returncode != 0:
        log(f"{model} seed {seed} {wl}: exit {p.returncode}: {p.stderr.strip()[-300:]}")
        return None, wall
    best, curve = None, []
    for line in p.stdout.splitlines():
        if not line.startswith('{"type": "record"'):
            continue
        r = json.loads(line)
        if r["status"] == "ok" and r["ms"] > 0 and (best is None or r["ms"] < best):
            best = r["ms"]
        curve.append(best)
    return curve, wall


def write_csv(path, rows):
    """The rows where a run's best time changed, and its last: a curve is a
    step function, so the rest follow from them (a row per trial of 1,300
    runs is 15 MB)."""
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["workload", "model", "seed", "trial", "best_ms", "optimum_ms"])
        w.writeheader()
        for i, r in enumerate(rows):
            prev = rows[i - 1] if i else None
            nxt = rows[i + 1] if i + 1 < len(rows) else None
            same_run = lambda a: a is not None and (a["workload"], a["model"], a["seed"]) == (r["workload"], r["model"], r["seed"])
            if not same_run(prev) or prev["best_ms"] != r["best_ms"] or not same_run(nxt):
                w.writerow(r)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mtgpu", required=True)
    ap.add_argument("--db", required=True)
    ap.add_argument("--holdout", default="resnet18;squeezenet1_1")
    ap.add_argument("--models", default="random xgb gnn gnn-transfer gnn-meta")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--meta-model", default="data/opencl_gnn_meta.model")
    ap.add_argument("--transfer-model", default="data/opencl_gnn_pooled.model")
    ap.add_argument("--out", required=True)
    ap.add_argument("--command", default="")
    args = ap.parse_args()
    models = args.models.split()
    held = set(benchlib.workloads_of(args.mtgpu, args.holdout))
    if "gnn-meta" in models:
        benchlib.check_held_out("replay_curves", args.meta_model, held)
    if "gnn-transfer" in models:
        benchlib.check_held_out("replay_curves", args.transfer_model, held)
    fp, convs = recorded(args.db, held)
    if not convs:
        sys.exit(f"replay_curves: {args.db} has no records of the held-out convolutions")
    log(f"{len(convs)} held-out convolutions recorded on {fp}; {len(models)} models x {args.seeds} seeds x {args.trials} trials")
    os.makedirs(args.out, exist_ok=True)
    t_start = time.time()
    rows, runs = [], []
    for wl in sorted(convs):
        for seed in range(1, args.seeds + 1):
            for model in models:  # the models of one seed next to each other
                curve, wall = run_one(args, wl, model, seed, fp)
                if curve is None:
                    runs.append({"workload": wl, "model": model, "seed": seed, "status": "failed", "wall_s": wall})
                    continue
                opt = convs[wl][0]
                runs.append({"workload": wl, "model": model, "seed": seed, "status": "ok", "trials": len(curve), "wall_s": wall,
                             "final": opt / curve[-1] if curve and curve[-1] else 0.0})
                for t, b in enumerate(curve, 1):
                    rows.append({"workload": wl, "model": model, "seed": seed, "trial": t, "best_ms": b, "optimum_ms": opt})
        log(f"{wl}: done ({time.time() - t_start:.0f} s)")
    write_csv(os.path.join(args.out, "replay_curves.csv"), rows)

    # share of the optimum reached after t trials: a run that ended earlier (its
    # recorded configs used up) keeps its last best
    by_run = {}
    for r in rows:
        by_run.setdefault((r["workload"], r["model"], r["seed"]), []).append(r)
    def reached(model, t):
        vals = []
        for (wl, m, s), rs in by_run.items():
            if m != model:
                continue
            rs = sorted(rs, key=lambda r: r["trial"])
            best = None
            for r in rs:
                if r["trial"] <= t and r["best_ms"]:
                    best = r["best_ms"]
            vals.append(rs[0]["optimum_ms"] / best if best else 0.0)
        return statistics.mean(vals) if vals else None
    def to95(model):
        out = []
        for (wl, m, s), rs in by_run.items():
            if m != model:
                continue
            hit = next((r["trial"] for r in sorted(rs, key=lambda r: r["trial"]) if r["best_ms"] and r["optimum_ms"] / r["best_ms"] >= 0.95), None)
            out.append(hit if hit is not None else float("inf"))
        return statistics.median(out) if out else None
    cps = [c for c in CHECKPOINTS if c <= args.trials]
    wall = time.time() - t_start
    md = ["# Search efficiency on held-out convolutions, in replay", "",
          f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {benchlib.cpu_model()}, {wall / 60:.0f} min. Regenerate: `{args.command}`.", "",
          f"{len(convs)} convolutions of `{args.holdout}` (held out of both model files' training) with records of device `{fp}` in "
          f"`{args.db}` ({sum(n for _, n in convs.values())} working records; each convolution's templates tuned together); "
          f"{args.seeds} seeds per model; `mtgpu tune --simulate` answers every measurement from the recording, so the search "
          "only proposes recorded configs. Reached: the convolution's fastest recorded time over the best time found, mean over "
          "convolutions and seeds (1.000: the optimum). Models: gnn-meta and gnn-transfer start from "
          f"`{args.meta_model}` and `{args.transfer_model}`; the others learn from the task's own measurements.", "",
          "| model | " + " | ".join(f"t={c}" for c in cps) + " | median trials to 95% |", "|---|" + "---|" * (len(cps) + 1)]
    for m in models:
        md.append(f"| {m} | " + " | ".join(f"{reached(m, c):.3f}" for c in cps) + f" | {to95(m)} |")
    md.append("")
    ok = [r for r in runs if r["status"] == "ok"]
    md.append(f"{len(ok)} of {len(runs)} runs finished; mean wall time per run: " +
              ", ".join(f"{m} {statistics.mean(r['wall_s'] for r in ok if r['model'] == m):.1f} s" for m in models if any(r['model'] == m for r in ok)) + ".")
    md.append("")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(7, 4.2))
        ts = list(range(1, args.trials + 1))
        for m in models:
            ax.plot(ts, [reached(m, t) for t in ts], label=m)
        ax.set_xlabel("trials")
        ax.set_ylabel("fastest recorded / best found (mean)")
        ax.set_title(f"replay on {len(convs)} held-out convolutions, {args.seeds} seeds", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(args.out, "replay_curves.png"), dpi=110)
        md.append("Plot: `replay_curves.png`.")
    except ImportError:
        pass
    open(os.path.join(args.out, "replay_curves.md"), "w").write("\n".join(md) + "\n")
    log(f"wrote {args.out}/replay_curves.md")
    return 0 if len(ok) == len(runs) else 1


if __name__ == "__main__":
    sys.exit(main())
