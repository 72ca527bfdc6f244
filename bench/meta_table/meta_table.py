#!/usr/bin/env python3
"""MetaTune's table on this machine (bench/meta_table/run.sh drives it):
networks held out of the cost models' pre-training, tuned with B trials per
task by each cost model on a fresh records database, then run whole with
the tuned kernels.

    python3 bench/meta_table/meta_table.py --mtgpu BUILD/mtgpu --nets "squeezenet1_1 resnet18"
        --models "xgb gnn-transfer gnn-meta" --meta-model M --transfer-model T --budgets "32 64"
        --rounds R --repeat N --work DIR --out DIR --command CMD [--remeasure]

Tuning: one run per (network, model) with the largest budget, B x tasks
trials, `--refine 0` (the cost models' picks alone), each starting with
empty compiled-kernel caches (mtgpu's and PoCL's) so that no run profits
from another's compiles. The scheduler's choices do not depend on the total
budget (every unit gets its first round, then the largest expected gain), so
the records of a smaller budget b are the first b x tasks records of the
same run: they are copied to a database of their own, and that budget's
tuning time is the time of its last record.

Measuring: `mtgpu run --profile` of every (model, budget) database and of
the default configs (an empty database), in turns, `--rounds` times, so
that every ratio comes from one window of this shared machine; the table
gives the median over the rounds of each run's median pass (network) and
of its convolutions' device time.

A model file whose manifest does not hold every convolution of a network
out of training is refused: the table is of networks the models never saw.

Writes OUT/meta_table.md, OUT/meta_table.json; WORK keeps the databases,
logs and one JSON per finished tuning run, so an interrupted run resumes.
"""
import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import benchlib  # noqa: E402


log = benchlib.logger("meta_table")


def tune(args, net, model, ntasks, work):
    tag = f"{net}-{model}"
    done = os.path.join(work, tag + ".tune.json")
    if os.path.exists(done):
        return json.load(open(done))
    db = os.path.join(work, tag + ".db")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.remove(db + suffix)
    budget = max(args.budgets) * ntasks
    cmd = [args.mtgpu, "tune", net, "--trials", str(budget), "--db", db, "--refine", "0", "--time-limit", str(args.time_limit),
           "--seed", str(args.seed), "--json", "--cost-model", model]
    if model == "gnn-meta":
        cmd += ["--model", args.meta_model]
    elif model == "gnn-transfer":
        cmd += ["--model", args.transfer_model]
    env = dict(os.environ)
    caches = tempfile.mkdtemp(prefix="mtgpu-meta-table-cache-")
    env["MTGPU_CACHE_DIR"] = os.path.join(caches, "mtgpu")
    env["POCL_CACHE_DIR"] = os.path.join(caches, "pocl")
    log(f"tuning {tag}: {budget} trials")
    t0 = time.time()
    with open(os.path.join(work, tag + ".tune.log"), "w") as logf:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=logf, text=True, env=env)
    wall = time.time() - t0
    shutil.rmtree(caches, ignore_errors=True)
    summary = None
    for line in p.stdout.splitlines():
        if line.startswith("{") and '"type": "summary"' in line:
            summary = json.loads(line)
    if p.returncode != 0 or not summary:
        log(f"{tag}: tune failed (exit {p.returncode}); see {work}/{tag}.tune.log")
        return None
    res = {"net": net, "model": model, "db": db, "start": t0, "wall_s": wall, "trials": summary["trials_done"],
           "timed_out": summary["timed_out"], "estimated_ms": summary["network_ms"], "fingerprint": summary["fingerprint"]}
    json.dump(res, open(done, "w"), indent=1)
    log(f"{tag}: {res['trials']} trials in {wall:.0f} s")
    return res


def budget_db(run, budget, ntasks, work):
    """The first budget x ntasks records of the run's database, and the time
    its last one was stored (seconds after the run started)."""
    n = budget * ntasks
    src = run["db"]
    dst = os.path.join(work, f"{run['net']}-{run['model']}-{budget}.db")
    if os.path.exists(dst):
        os.remove(dst)
    s = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    d = sqlite3.connect(dst)
    s.backup(d)
    s.close()
    ids = [r[0] for r in d.execute("SELECT id FROM records ORDER BY id")]
    kept = ids[:n]
    if len(ids) > n:
        d.execute("DELETE FROM records WHERE id > ?", (kept[-1],))
    t_last = d.execute("SELECT max(timestamp) FROM records").fetchone()[0] or run["start"]
    d.commit()
    d.execute("VACUUM")
    d.close()
    return dst, len(kept), t_last - run["start"]


def measure(args, net, db):
    cmd = [args.mtgpu, "run", net, "--repeat", str(args.repeat), "--profile", "--json"]
    cmd += ["--db", db] if db else ["--db", os.path.join(args.work, "empty.db")]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        log(f"run {net} {db}: exit {p.returncode}: {p.stderr.strip()[-300:]}")
        return None
    obj = json.loads(p.stdout)
    return {"median_ms": obj["median_ms"], "conv_ms": obj["kinds"].get("conv2d"), "convs_tuned": obj["convs_tuned"], "convs": obj["convs"]}


def fmt(v, nd=2):
    return "-" if v is None else f"{v:.{nd}f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mtgpu", required=True)
    ap.add_argument("--nets", default="squeezenet1_1 resnet18")
    ap.add_argument("--models", default="xgb gnn-transfer gnn-meta")
    ap.add_argument("--meta-model", default="data/opencl_gnn_meta.model")
    ap.add_argument("--transfer-model", default="data/opencl_gnn_pooled.model")
    ap.add_argument("--budgets", default="32 64")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--time-limit", type=int, default=7200)
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--command", default="")
    args = ap.parse_args()
    args.budgets = sorted(int(b) for b in args.budgets.split())
    nets, models = args.nets.split(), args.models.split()
    os.makedirs(args.work, exist_ok=True)
    os.makedirs(args.out, exist_ok=True)
    # an empty records database for the default-config rows (importing an empty log makes one)
    empty = os.path.join(args.work, "empty.db")
    if not os.path.exists(empty):
        nothing = os.path.join(args.work, "empty.log")
        open(nothing, "w").close()
        subprocess.run([args.mtgpu, "import-autotvm", "--db", empty, nothing], check=True, capture_output=True)
    manifests = {}
    runs = {}
    for net in nets:
        wls = benchlib.workloads_of(args.mtgpu, net)
        if "gnn-meta" in models:
            manifests[f"{net}/gnn-meta"] = benchlib.check_held_out("meta_table", args.meta_model, wls, f"{net}'s convolutions")
        if "gnn-transfer" in models:
            manifests[f"{net}/gnn-transfer"] = benchlib.check_held_out("meta_table", args.transfer_model, wls, f"{net}'s convolutions")
        for model in models:
            r = tune(args, net, model, len(wls), args.work)
            if r:
                runs[(net, model)] = (r, len(wls))
    # the budgets' databases
    cells = []
    for (net, model), (r, ntasks) in runs.items():
        for b in args.budgets:
            db, n, t = budget_db(r, b, ntasks, args.work)
            cells.append({"net": net, "model": model, "budget": b, "db": db, "trials": n, "tune_s": t, "rounds": []})
    for net in nets:
        cells.append({"net": net, "model": "default", "budget": 0, "db": None, "trials": 0, "tune_s": 0, "rounds": []})
    # measure in turns
    for rnd in range(args.rounds):
        for net in nets:
            for c in [c for c in cells if c["net"] == net]:
                m = measure(args, net, c["db"])
                if m:
                    c["rounds"].append(m)
        log(f"round {rnd + 1}/{args.rounds} measured")
    for c in cells:
        ok = c["rounds"]
        c["network_ms"] = statistics.median(m["median_ms"] for m in ok) if ok else None
        c["conv_ms"] = statistics.median(m["conv_ms"] for m in ok) if ok else None
    res = {"command": args.command, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpu": benchlib.cpu_model(),
           "budgets": args.budgets, "rounds": args.rounds, "repeat": args.repeat, "seed": args.seed,
           "meta_model": args.meta_model, "transfer_model": args.transfer_model, "manifests": manifests,
           "fingerprint": next(iter(runs.values()))[0]["fingerprint"] if runs else None, "cells": cells}
    json.dump(res, open(os.path.join(args.out, "meta_table.json"), "w"), indent=1)
    md = ["# Held-out networks tuned by each cost model (MetaTune's table)", "",
          f"Measured {res['date']} on {res['cpu']} (PoCL, fingerprint `{res['fingerprint']}`). Regenerate: `{args.command}`.", "",
          "Each network was held out of the pre-training of both model files (their manifests are checked). Tuning: "
          f"B trials per task on a fresh database, `--refine 0`, empty kernel caches; the smaller budget's records are the first "
          f"B x tasks records of the larger run. Latency: `mtgpu run` median pass over {args.repeat} passes, median of "
          f"{args.rounds} rounds taken in turns with every other row of the network; conv: the convolutions' device time "
          "(`--profile`).", ""]
    for net in nets:
        md += [f"## {net}", "", "| model | trials/task | tuning s | network ms | conv ms | network vs xgb at the same budget |",
               "|---|---|---|---|---|---|"]
        for c in [c for c in cells if c["net"] == net]:
            ref = next((x for x in cells if x["net"] == net and x["model"] == "xgb" and x["budget"] == c["budget"]), None)
            ratio = (f"{c['network_ms'] / ref['network_ms']:.3f}" if ref and ref["network_ms"] and c["network_ms"] and c["model"] != "default"
                     else "-")
            md.append(f"| {c['model']} | {c['budget'] or '-'} | {fmt(c['tune_s'], 0)} | {fmt(c['network_ms'])} | {fmt(c['conv_ms'])} | {ratio} |")
        meta32 = next((x for x in cells if x["net"] == net and x["model"] == "gnn-meta" and x["budget"] == min(args.budgets)), None)
        xgb64 = next((x for x in cells if x["net"] == net and x["model"] == "xgb" and x["budget"] == max(args.budgets)), None)
        if meta32 and xgb64 and meta32["network_ms"] and xgb64["network_ms"]:
            md += ["", f"gnn-meta at {min(args.budgets)} trials per task: {meta32['network_ms']:.2f} ms against xgb at "
                       f"{max(args.budgets)}: {xgb64['network_ms']:.2f} ms ({meta32['network_ms'] / xgb64['network_ms']:.3f}x)."]
        md.append("")
    open(os.path.join(args.out, "meta_table.md"), "w").write("\n".join(md) + "\n")
    log(f"wrote {args.out}/meta_table.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
