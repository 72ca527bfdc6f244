#!/usr/bin/env python3
"""Helpers of bench/cm_accuracy/run.sh: the data-set snapshot, the held-out
splits, and the report (table, CSV, plot, verdict) from the eval-model runs.

    python3 bench/cm_accuracy/cm_accuracy.py prepare SRC_DB SNAPSHOT --splits N --holdout-frac F [--device FP] > splits.json
    python3 bench/cm_accuracy/cm_accuracy.py report --runs RUNS.jsonl --splits splits.json --snapshot SNAPSHOT
                                        --source SRC_DB --command CMD --out DIR [--wall-s S] [--stopped-early]

prepare copies SRC_DB (a records database, possibly being written by a
tuner: SQLite's online backup gives one consistent state) to SNAPSHOT, so that
every run of the benchmark sees the same records, and prints the held-out
splits as JSON: K-fold cross-validation by workload, K = round(1 / F) (at
least 2). The workloads with usable records (not AutoTVM imports; of --device
if given) are shuffled by a hash of their text and the round, round =
(split - 1) div K, and split s holds out every K-th of them from position
(s - 1) mod K; so the first K splits are disjoint and cover every workload
once, and each split holds out about F of the workloads.

report reads the eval-model results (one JSON object per line, as
`mtgpu eval-model --json` prints them plus split, seed, train_frac, model,
status and wall_s) and writes DIR/cm_accuracy.md, DIR/cm_accuracy.csv and,
where matplotlib is there, DIR/cm_accuracy.png.
"""
import argparse
import csv
import hashlib
import json
import os
import sqlite3
import sys
import time

MODEL_ORDER = ["gnn", "gnn-shared", "mlp", "xgb", "random"]
BASELINES = ["gnn-shared", "mlp", "xgb"]
METRICS = [("pairwise_acc", "pairwise"), ("spearman", "Spearman"), ("top1", "top-1"), ("top5", "top-5")]
# A difference in mean pairwise accuracy smaller than this is "about the same".
SAME = 0.01
CSV_FIELDS = ["split", "seed", "model", "kind", "train_frac", "status", "params", "train_samples", "train_workloads",
              "test_samples", "test_workloads", "groups", "pairs", "pairwise_acc", "spearman", "top1", "top5",
              "train_s", "predict_s", "wall_s", "held_out"]


def ro_connect(path):
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


# ---- prepare ----

def prepare(args):
    if not os.path.exists(args.src):
        sys.exit(f"cm_accuracy.py: {args.src}: no such database")
    src = ro_connect(args.src)
    if os.path.exists(args.snapshot):
        os.remove(args.snapshot)
    dst = sqlite3.connect(args.snapshot)
    src.backup(dst)
    src.close()
    q = ("SELECT DISTINCT w.text FROM records r JOIN workloads w ON w.id = r.workload_id "
         "WHERE substr(r.source, 1, 8) != 'autotvm:'")
    par = []
    if args.device:
        q += " AND r.device = ?"
        par.append(args.device)
    wls = sorted(row[0] for row in dst.execute(q, par))
    dst.close()
    if len(wls) < 2:
        sys.exit(f"cm_accuracy.py: {args.src} has records of {len(wls)} workload(s); a held-out split needs at least two")
    k = max(2, int(round(1.0 / args.holdout_frac)))
    k = min(k, len(wls))
    splits = []
    for s in range(1, args.splits + 1):
        rnd, pos = divmod(s - 1, k)
        order = sorted(wls, key=lambda t: hashlib.sha256(f"{rnd}:{t}".encode()).hexdigest())
        splits.append({"split": s, "folds": k, "held_out": order[pos::k]})
    json.dump({"workloads": wls, "folds": k, "splits": splits}, sys.stdout, indent=1)
    print()


# ---- report ----

def describe_db(path):
    db = ro_connect(path)
    d = {}
    d["records"] = db.execute("SELECT count(*) FROM records").fetchone()[0]
    d["by_status"] = db.execute("SELECT status, count(*) FROM records GROUP BY status ORDER BY 2 DESC").fetchall()
    d["autotvm"] = db.execute("SELECT count(*) FROM records WHERE substr(source, 1, 8) = 'autotvm:'").fetchone()[0]
    d["workloads"] = db.execute("SELECT count(DISTINCT workload_id) FROM records").fetchone()[0]
    d["templates"] = db.execute("SELECT template, count(*) FROM records GROUP BY template ORDER BY template").fetchall()
    d["groups"] = db.execute("SELECT count(*) FROM (SELECT DISTINCT workload_id, template, device FROM records)").fetchone()[0]
    d["devices"] = db.execute("SELECT d.name, d.platform, d.driver, d.backend, d.fingerprint, count(r.id) FROM devices d "
                              "JOIN records r ON r.device = d.fingerprint GROUP BY d.fingerprint ORDER BY 6 DESC").fetchall()
    t = db.execute("SELECT min(timestamp), max(timestamp) FROM records").fetchone()
    d["span"] = t
    db.close()
    return d


def load_runs(path):
    runs = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                runs.append(json.loads(line))
    return runs


def num(r, k):
    v = r.get(k)
    return v if isinstance(v, (int, float)) else None


def stats(vals):
    vals = [v for v in vals if v is not None]
    if not vals:
        return None
    return (sum(vals) / len(vals), min(vals), max(vals), len(vals))


def fmt_stat(st, spec=".3f"):
    if st is None:
        return "-"
    mean, lo, hi, n = st
    if n == 1 or format(lo, spec) == format(hi, spec):
        return format(mean, spec)
    return f"{format(mean, spec)} ({format(lo, spec)}-{format(hi, spec)})"


def share(f):
    return f"{100 * f:g}%"


def ordered_models(models):
    return sorted(models, key=lambda m: (MODEL_ORDER.index(m) if m in MODEL_ORDER else len(MODEL_ORDER), m))


def check_pairing(ok):
    """Problems with the pairing: within a split every model and share must see the same held-out set,
    within a (split, share) the same training set."""
    problems = []
    by_split = {}
    for r in ok:
        by_split.setdefault(r["split"], []).append(r)
    for s, rs in sorted(by_split.items()):
        keys = {(r.get("test_workloads"), r.get("test_samples"), r.get("groups"), r.get("pairs"), r.get("train_workloads")) for r in rs}
        if len(keys) > 1:
            problems.append(f"split {s}: the runs saw different held-out sets {sorted(keys)}")
        by_frac = {}
        for r in rs:
            by_frac.setdefault(r["train_frac"], set()).add(r.get("train_samples"))
        for f, ns in sorted(by_frac.items()):
            if len(ns) > 1:
                problems.append(f"split {s}, share {share(f)}: different training sample counts {sorted(ns)}")
    return problems


def paired_diffs(ok, a, b, f, key="pairwise_acc"):
    va = {r["split"]: num(r, key) for r in ok if r["model"] == a and r["train_frac"] == f}
    vb = {r["split"]: num(r, key) for r in ok if r["model"] == b and r["train_frac"] == f}
    return [va[s] - vb[s] for s in sorted(va) if s in vb and va[s] is not None and vb[s] is not None]


def and_list(xs):
    xs = list(xs)
    if not xs:
        return "none"
    return xs[0] if len(xs) == 1 else ", ".join(xs[:-1]) + " and " + xs[-1]


def mean_of(ok, m, f, key="pairwise_acc"):
    st = stats([num(r, key) for r in ok if r["model"] == m and r["train_frac"] == f])
    return st[0] if st else None


def verdict(ok, models, fracs, params):
    """The paragraph: does gnn beat each baseline, does its lead grow as the share shrinks, does the claim hold."""
    if "gnn" not in models:
        return "The modular GNN (`gnn`) was not run, so there is no verdict."
    base = [b for b in BASELINES if b in models]
    if not base:
        return "None of the baselines (gnn-shared, mlp, xgb) was run, so there is no verdict."
    fs = sorted(fracs)
    small, big = fs[0], fs[-1]
    L = []
    # Best mean per share, against the baselines.
    best_at = []
    for f in fs:
        means = {m: mean_of(ok, m, f) for m in ["gnn"] + base}
        if None not in means.values():
            best_at.append((f, all(means["gnn"] > means[b] for b in base)))
    best_mean_all = bool(best_at) and all(x for _, x in best_at) and len(best_at) == len(fs)
    L.append(f"Mean pairwise accuracy on the held-out workloads: `gnn` is above {and_list('`' + b + '`' for b in base)} at "
             f"{sum(x for _, x in best_at)} of {len(fs)} shares.")
    beats_all = True
    grows = []
    for b in base:
        per, outcome = [], []
        for f in fs:
            d = paired_diffs(ok, "gnn", b, f)
            if not d:
                per.append(f"{share(f)} no paired runs")
                outcome.append(None)
                continue
            wins, losses = sum(x > 0 for x in d), sum(x < 0 for x in d)
            per.append(f"{share(f)} {sum(d) / len(d):+.3f} ({wins} of {len(d)} splits better)")
            outcome.append("beats" if wins == len(d) else "loses" if losses == len(d) else "mixed")
        if any(o != "beats" for o in outcome):
            beats_all = False
        got = [share(f) for f, o in zip(fs, outcome) if o == "beats"]
        if len(got) == len(fs):
            head = "is better on every split at every share"
        elif all(o == "loses" for o in outcome):
            head = "is worse on every split at every share"
        elif not got:
            head = "is better on every split at no share"
        else:
            head = f"is better on every split only at {and_list(got)}"
        ds, db_ = paired_diffs(ok, "gnn", b, small), paired_diffs(ok, "gnn", b, big)
        trend = ""
        if ds and db_ and small != big:
            ms, mb = sum(ds) / len(ds), sum(db_) / len(db_)
            if ms - mb > SAME:
                trend = "grows"
                grows.append(b)
            elif mb - ms > SAME:
                trend = "shrinks"
            else:
                trend = f"stays about the same (within {SAME})"
            trend = f"; its lead {trend} as the share shrinks ({ms:+.3f} at {share(small)}, {mb:+.3f} at {share(big)})"
        L.append(f"Against `{b}`, paired by split, `gnn` {head} (gnn minus {b}: {'; '.join(per)}){trend}.")
    for key, lbl in METRICS[1:]:
        best = []
        for f in fs:
            means = {m: mean_of(ok, m, f, key) for m in ["gnn"] + base}
            if None not in means.values():
                best.append(all(means["gnn"] > means[b] for b in base))
        if best:
            L.append(f"On {lbl}, `gnn` has the best mean of these models at {sum(best)} of {len(best)} shares.")
    if "random" in models:
        means = [sum(d) / len(d) for d in (paired_diffs(ok, "gnn", "random", f) for f in fs) if d]
        if means:
            L.append(f"Against random scores (about half of the pairs right) `gnn` is {min(means):+.3f} to {max(means):+.3f}.")
    pg = params.get("gnn")
    nets = [b for b in ("gnn-shared", "mlp") if params.get(b) is not None]
    size_ok = None
    if pg is not None and nets:
        size_ok = all(pg < params[b] for b in nets)
        L.append(f"Size: `gnn` has {pg} parameters against " + and_list(f"{params[b]} for `{b}`" for b in nets) +
                 (" (eval-model does not count XGBoost's trees)" if "xgb" in models else "") +
                 f": the modular network is {'the smallest' if size_ok else 'not the smallest'}.")
    nspl = len({r["split"] for r in ok})
    if nspl:
        L.append(f"With {nspl} split(s), all of them agreeing on the sign of a difference happens by chance "
                 f"{100 * 2 * 0.5 ** nspl:.0f}% of the time when there is none; the min-max ranges in the table show how much "
                 "the choice of held-out workloads alone moves the numbers.")
    parts = []
    acc = "yes" if beats_all else "in the mean only" if best_mean_all else "no"
    parts.append("higher accuracy: " + {"yes": "yes, on every split against every baseline at every share",
                                       "in the mean only": "in the mean at every share, but not on every split against every baseline",
                                       "no": "no"}[acc])
    few = "yes" if len(grows) == len(base) else ("partly" if grows else "no")
    if small == big:
        few = "not measured (one share)"
    parts.append("more so with fewer examples: " + {"yes": "yes, against every baseline",
                                                   "partly": f"against {and_list('`' + b + '`' for b in grows)} only",
                                                   "no": "no"}.get(few, few))
    if size_ok is not None:
        parts.append("with a smaller network: " + ("yes" if size_ok else "no"))
    yes = [acc == "yes", few == "yes"] + ([size_ok] if size_ok is not None else [])
    none = acc == "no" and few == "no" and size_ok is not True
    word = "holds" if all(yes) else "does not hold" if none else "holds only in part"
    L.append(f"So the second paper's claim (higher accuracy with a smaller network and fewer examples) {word} on this data set: "
             f"{'; '.join(parts)}.")
    return " ".join(L)


def write_csv(path, runs):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS, extrasaction="ignore")
        w.writeheader()
        for r in runs:
            row = dict(r)
            if isinstance(row.get("held_out"), list):
                row["held_out"] = ";".join(row["held_out"])
            if row.get("params") == -1:
                row["params"] = ""
            w.writerow(row)


def write_png(path, ok, models, fracs):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("cm_accuracy.py: matplotlib is missing (bench/common/setup.sh installs it): no PNG", file=sys.stderr)
        return False
    fs = sorted(fracs)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, (key, label) in zip(axes, [("pairwise_acc", "pairwise accuracy"), ("spearman", "Spearman")]):
        for j, m in enumerate(models):
            nudge = 1 + 0.025 * (j - (len(models) - 1) / 2)  # keep the bars of one share apart
            xs, mean, lo, hi = [], [], [], []
            for f in fs:
                st = stats([num(r, key) for r in ok if r["model"] == m and r["train_frac"] == f])
                if st:
                    xs.append(100 * f * nudge)
                    mean.append(st[0])
                    lo.append(st[0] - st[1])
                    hi.append(st[2] - st[0])
            if xs:
                ax.errorbar(xs, mean, yerr=[lo, hi], marker="o", capsize=3, label=m,
                            linestyle="--" if m == "random" else "-")
        ax.set_xscale("log")
        ax.set_xticks([100 * f for f in fs])
        ax.set_xticklabels([share(f) for f in fs])
        ax.minorticks_off()
        ax.set_xlabel("share of the training records")
        ax.set_ylabel(f"{label} on held-out workloads")
        ax.grid(True, alpha=0.3)
    axes[0].axhline(0.5, color="gray", linewidth=0.8)
    axes[0].legend(loc="best", fontsize="small")
    fig.suptitle("Cost-model accuracy on held-out workloads (mean over splits, bars: min-max)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def report(args):
    runs = load_runs(args.runs)
    spl = json.load(open(args.splits))
    for r in runs:
        r.setdefault("held_out", next((s["held_out"] for s in spl["splits"] if s["split"] == r["split"]), []))
    os.makedirs(args.out, exist_ok=True)
    write_csv(os.path.join(args.out, "cm_accuracy.csv"), runs)
    ok = [r for r in runs if r.get("status") == "ok"]
    failed = [r for r in runs if r.get("status") != "ok"]
    models = ordered_models({r["model"] for r in runs})
    fracs = sorted({r["train_frac"] for r in runs})
    params = {}
    for m in models:
        ps = {num(r, "params") for r in ok if r["model"] == m}
        ps.discard(None)
        ps.discard(-1)
        params[m] = max(ps) if ps else None
    d = describe_db(args.snapshot)
    png = write_png(os.path.join(args.out, "cm_accuracy.png"), ok, models, fracs)

    L = ["# Cost-model accuracy on held-out workloads\n"]
    L.append(f"Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `{args.command}` "
             f"({len(ok)} eval-model runs, {len(failed)} failed, {args.wall_s:.0f} s)"
             + (" — stopped by TIME_LIMIT before every run was done" if args.stopped_early else "") + ".\n")
    st = ", ".join(f"{n} {s}" for s, n in d["by_status"])
    tm = ", ".join(f"{t} {n}" for t, n in d["templates"])
    span = ""
    if d["span"][0]:
        span = (f", measured {time.strftime('%Y-%m-%d %H:%M', time.gmtime(d['span'][0]))} to "
                f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(d['span'][1]))}")
    L.append(f"Data set: `{args.source}` (a snapshot taken at the start): {d['records']} records ({st}; per template: {tm}) "
             f"of {d['workloads']} workloads in {d['groups']} (workload, template, device) groups{span}"
             + (f"; {d['autotvm']} AutoTVM imports, not used" if d["autotvm"] else "") + ".")
    for name, plat, drv, be, fp, n in d["devices"]:
        L.append(f"Device `{fp}` ({be}): {name}, {plat}, driver {drv}: {n} records.")
    L.append("")
    nfold = spl["folds"]
    L.append(f"Method: {len(spl['splits'])} held-out splits by workload, K-fold with K = {nfold} over the "
             f"{len(spl['workloads'])} workloads (split s holds out fold s; `bench/cm_accuracy/cm_accuracy.py` says how the folds are "
             "drawn). For each split, share and model: `mtgpu eval-model --db SNAPSHOT --cost-model MODEL --holdout "
             "<the split's workloads> --train-frac SHARE --seed SPLIT --json`: the model is fitted on that share of the "
             "records of the other workloads (a seeded subsample; the smaller shares' records are subsets of the larger "
             "ones') and scored on every record of the held-out workloads, per (workload, template). Every model and share "
             "of one split sees the same held-out records, and every model of one (split, share) the same training records, "
             "so the comparison is paired. Pairwise: share of config pairs of one group ordered like their measured "
             "times (pairs over all groups pooled; a failed config is slower than any working one); Spearman: mean over "
             "groups; top-k: best measured time over the best among the model's k top picks, FLOP-weighted. Cells: mean "
             "over splits (min-max). Params: trainable parameters (eval-model's `params`; XGBoost's tree ensemble is not "
             "counted). Fit: the model's training time in seconds (wall time; the development machine may be shared with other jobs).\n")
    problems = check_pairing(ok)
    if problems:
        L.append("**Pairing check failed**: " + "; ".join(problems) + ".\n")

    # Pairwise accuracy, model x share.
    L.append("## Pairwise accuracy, model x share of the training records\n")
    pivot = ["| model | params | " + " | ".join(share(f) for f in fracs) + " |", "|---|---|" + "---|" * len(fracs)]
    for m in models:
        cells = [fmt_stat(stats([num(r, "pairwise_acc") for r in ok if r["model"] == m and r["train_frac"] == f])) for f in fracs]
        pivot.append(f"| {m} | {params[m] if params[m] is not None else '-'} | " + " | ".join(cells) + " |")
    L += pivot + [""]
    L.append(verdict(ok, models, fracs, params) + "\n")

    L.append("## Every metric\n")
    L.append("| model | share | params | train workloads / records | held-out workloads / records | "
             + " | ".join(lbl for _, lbl in METRICS) + " | fit s |")
    L.append("|---|---|---|---|---|" + "---|" * (len(METRICS) + 1))
    for m in models:
        for f in fracs:
            rs = [r for r in ok if r["model"] == m and r["train_frac"] == f]
            if not rs:
                L.append(f"| {m} | {share(f)} | - | - | - |" + " - |" * (len(METRICS) + 1))
                continue
            tw, ts = stats([num(r, "train_workloads") for r in rs]), stats([num(r, "train_samples") for r in rs])
            hw, hs = stats([num(r, "test_workloads") for r in rs]), stats([num(r, "test_samples") for r in rs])
            cells = [fmt_stat(stats([num(r, k) for r in rs])) for k, _ in METRICS]
            L.append(f"| {m} | {share(f)} | {params[m] if params[m] is not None else '-'} | {fmt_stat(tw, '.0f')} / {fmt_stat(ts, '.0f')} "
                     f"| {fmt_stat(hw, '.0f')} / {fmt_stat(hs, '.0f')} | " + " | ".join(cells)
                     + f" | {fmt_stat(stats([num(r, 'train_s') for r in rs]), '.2f')} |")
    L.append("")
    L.append("## Splits\n")
    for s in spl["splits"]:
        L.append(f"- split {s['split']}: held out {'; '.join('`' + w + '`' for w in s['held_out'])}")
    L.append("")
    if failed:
        L.append("## Failed runs\n")
        for r in failed:
            L.append(f"- split {r['split']}, {r['model']}, share {share(r['train_frac'])}: {r.get('error', 'failed')}")
        L.append("")
    L.append("Files: `cm_accuracy.csv` (one row per run)" + (", `cm_accuracy.png` (pairwise accuracy and Spearman against the share, "
             "per model)" if png else "") + ".")
    with open(os.path.join(args.out, "cm_accuracy.md"), "w") as f:
        f.write("\n".join(L) + "\n")
    print("pairwise accuracy on held-out workloads, mean (min-max) over splits:")
    print("\n".join(pivot))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("src")
    p.add_argument("snapshot")
    p.add_argument("--splits", type=int, required=True)
    p.add_argument("--holdout-frac", type=float, required=True)
    p.add_argument("--device")
    r = sub.add_parser("report")
    r.add_argument("--runs", required=True)
    r.add_argument("--splits", required=True)
    r.add_argument("--snapshot", required=True)
    r.add_argument("--source", required=True)
    r.add_argument("--command", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--wall-s", type=float, default=0)
    r.add_argument("--stopped-early", action="store_true")
    a = ap.parse_args()
    if a.cmd == "prepare":
        if not (0 < a.holdout_frac < 1) or a.splits < 1:
            sys.exit("cm_accuracy.py: --holdout-frac must be in (0, 1) and --splits at least 1")
        prepare(a)
    else:
        report(a)


if __name__ == "__main__":
    main()
