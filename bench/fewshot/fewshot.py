#!/usr/bin/env python3
"""Few-shot accuracy of the cost models on held-out convolutions
(bench/fewshot/run.sh drives it).

    python3 bench/fewshot/fewshot.py --mtgpu BUILD/mtgpu --db DB [--db-b DB_B]
        --holdout "resnet18;squeezenet1_1" --ks "0 4 8 16 32 64" --repeats R
        --models "gnn-meta gnn-transfer gnn xgb" [--meta-args ARGS] [--pooled-args ARGS]
        --out DIR --command CMD

Each database is first copied to a snapshot (SQLite's online backup), so a
data set that a collector is still writing gives every run the same records.

Same platform: the held-out workloads (networks given by name stand for all
their convolutions) never enter training. gnn-meta is `mtgpu train --meta`
on every other record of DB (and of DB_B where given: the context node's
device features then vary); gnn-transfer is `mtgpu train` (pooled) on the
same records; gnn and xgb learn from the K configs alone. `mtgpu eval-model
--adapt-k K` then adapts each model its own way on K measured configs of
each held-out (workload, template, device) group of platform A (the device
of DB with the most records) and ranks the rest, --repeats draws per group.

Across platforms (with DB_B): gnn-meta and gnn-transfer are trained on
platform B's records alone (DB_B, held-out workloads excluded) and adapted
on platform A's held-out groups; xgb and gnn learn from A's K alone, as
above. Before that, the report measures how differently the two platforms
rank the same configs: configs measured on both (same workload, template
and config text), Spearman correlation of their times per (workload,
template), and how often one platform's best config is outside the other's
fastest 5%.

Writes DIR/fewshot.md (tables and verdicts), DIR/fewshot.csv (one row per
eval run), DIR/fewshot.json (everything, with the split and the model
manifests) and, where matplotlib is there, DIR/fewshot.png.
"""
import argparse
import csv
import json
import math
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import benchlib  # noqa: E402

METRICS = [("pairwise_acc", "pairwise"), ("spearman", "Spearman"), ("top1", "top-1"), ("top5", "top-5")]
CSV_FIELDS = ["setting", "model", "copied_from", "k", "repeats", "groups", "runs", "test_samples", "pairwise_acc", "spearman", "top1", "top5",
              "adapt_s", "predict_s", "wall_s", "status", "error"]


log = benchlib.logger("fewshot")
snapshot = benchlib.snapshot


def devices(db):
    c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    rows = c.execute("SELECT r.device, d.name, count(*) FROM records r LEFT JOIN devices d ON d.fingerprint = r.device "
                     "WHERE r.status = 'ok' GROUP BY r.device ORDER BY count(*) DESC").fetchall()
    c.close()
    return [{"fingerprint": fp, "name": name or "", "records": n} for fp, name, n in rows]


def run(cmd, what):
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.time() - t0
    if p.returncode != 0:
        err = (p.stderr.strip().splitlines() or ["?"])[-1]
        log(f"{what}: exit {p.returncode}: {err}")
        return None, wall, f"exit {p.returncode}: {err}"
    return p.stdout, wall, ""


def train(args, db, out_model, meta, extra, holdout, device=None):
    manifest = out_model + ".manifest.json"
    if os.path.exists(out_model) and os.path.exists(manifest) and not args.retrain:
        log(f"{out_model}: kept (--retrain to train again)")
    else:
        cmd = [args.mtgpu, "train", "--db", db, "--out", out_model, "--holdout", holdout, "--manifest", manifest, "--json"]
        if device:
            cmd += ["--device", device]
        if meta:
            cmd += ["--meta"]
        cmd += extra.split()
        log("training " + " ".join(cmd[1:]))
        out, wall, err = run(cmd, f"train {out_model}")
        if out is None:
            return None
        log(f"{out_model}: trained in {wall:.0f} s")
    with open(manifest) as f:
        return json.load(f)


def evaluate(args, setting, model, k, db, holdout, device, model_file=None):
    cmd = [args.mtgpu, "eval-model", "--db", db, "--holdout", holdout, "--device", device, "--adapt-k", str(k),
           "--adapt-repeats", str(args.repeats), "--seed", str(args.seed), "--json"]
    if model in ("gnn-meta", "gnn-transfer"):
        cmd += ["--cost-model", model, "--model", model_file]
        if model == "gnn-transfer" and args.transfer_args:
            cmd += args.transfer_args.split()
    else:
        cmd += ["--cost-model", model]
    out, wall, err = run(cmd, f"{setting} {model} K={k}")
    row = {"setting": setting, "model": model, "k": k, "repeats": args.repeats, "wall_s": round(wall, 2)}
    if out is None:
        row.update({"status": "failed", "error": err})
        return row
    obj = json.loads([l for l in out.splitlines() if l.startswith("{")][-1])
    row.update({m: obj.get(m) for m, _ in METRICS})
    row.update({f: obj.get(f) for f in ("groups", "runs", "test_samples", "adapt_s", "predict_s")})
    row["status"] = "ok"
    row["error"] = ""
    log(f"{setting}, {model}, K={k}: pairwise {row['pairwise_acc']:.3f}, Spearman {row['spearman']:.3f}, "
        f"top-1 {row['top1']:.3f}, top-5 {row['top5']:.3f} ({wall:.0f} s)")
    return row


def spearman(a, b):
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for t in range(i, j + 1):
                r[order[t]] = (i + j) / 2.0
            i = j + 1
        return r
    ra, rb = ranks(a), ranks(b)
    n = len(a)
    ma, mb = sum(ra) / n, sum(rb) / n
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = math.sqrt(sum((x - ma) ** 2 for x in ra))
    vb = math.sqrt(sum((y - mb) ** 2 for y in rb))
    return cov / (va * vb) if va > 0 and vb > 0 else float("nan")


def platform_difference(db_a, fp_a, db_b, fp_b):
    """Configs measured on both platforms: per (workload, template) group
    with at least 8 shared working configs, the Spearman correlation of
    their times, and whether each platform's best shared config is among the
    other's fastest 5% of the shared configs (at least its single fastest)."""
    def load(db, fp):
        c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        rows = c.execute("SELECT w.text, r.template, r.config, r.median_ms FROM records r JOIN workloads w ON w.id = r.workload_id "
                         "WHERE r.device = ? AND r.status = 'ok' AND r.median_ms > 0", (fp,)).fetchall()
        c.close()
        return {(w, t, cfg): ms for w, t, cfg, ms in rows}
    a, b = load(db_a, fp_a), load(db_b, fp_b)
    groups = {}
    for key in a.keys() & b.keys():
        groups.setdefault(key[:2], []).append((a[key], b[key]))
    out = []
    for (w, t), pairs in sorted(groups.items()):
        if len(pairs) < 8:
            continue
        ta, tb = [p[0] for p in pairs], [p[1] for p in pairs]
        top = max(1, int(math.floor(0.05 * len(pairs))))
        best_a, best_b = ta.index(min(ta)), tb.index(min(tb))
        rank_in_b = sorted(tb).index(tb[best_a])
        rank_in_a = sorted(ta).index(ta[best_b])
        out.append({"workload": w, "template": t, "configs": len(pairs), "spearman": spearman(ta, tb),
                    "a_best_outside_b_top": rank_in_b >= top, "b_best_outside_a_top": rank_in_a >= top})
    return out


def fmt(v, nd=3):
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{nd}f}"


def table(rows, setting, models, ks, metric):
    lines = ["| model | " + " | ".join(f"K={k}" for k in ks) + " |", "|---|" + "---|" * len(ks)]
    for m in models:
        cells = []
        for k in ks:
            r = next((r for r in rows if r["setting"] == setting and r["model"] == m and r["k"] == k and r["status"] == "ok"), None)
            cells.append(fmt(r[metric]) if r else "-")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return lines


def verdicts(rows, setting, ks):
    out = []
    def get(m, k):
        return next((r for r in rows if r["setting"] == setting and r["model"] == m and r["k"] == k and r["status"] == "ok"), None)
    small = [k for k in ks if 0 < k <= 16]
    wins = [k for k in small if get("gnn-meta", k) and get("gnn-transfer", k) and
            get("gnn-meta", k)["pairwise_acc"] > get("gnn-transfer", k)["pairwise_acc"]]
    if small:
        margins = ", ".join(f"K={k} {get('gnn-meta', k)['pairwise_acc'] - get('gnn-transfer', k)['pairwise_acc']:+.4f}"
                            for k in small if get("gnn-meta", k) and get("gnn-transfer", k))
        out.append(f"gnn-meta ranks better than gnn-transfer (pairwise accuracy) at {len(wins)} of the {len(small)} "
                   f"budgets K <= 16 ({', '.join(f'K={k}' for k in wins) or 'none'}); the margins: {margins}.")
    for k in ks:
        m, x = get("gnn-meta", k), get("xgb", k)
        if m and x:
            out.append(f"K={k}: gnn-meta {m['pairwise_acc']:.3f} against xgb {x['pairwise_acc']:.3f} "
                       f"({m['pairwise_acc'] - x['pairwise_acc']:+.3f}).")
    return out


def plot(rows, settings, models, ks, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(1, len(settings), figsize=(6 * len(settings), 4.2), squeeze=False)
    for ax, (setting, title) in zip(axes[0], settings):
        for m in models:
            pts = [(r["k"], r["pairwise_acc"]) for r in rows if r["setting"] == setting and r["model"] == m and r["status"] == "ok"]
            if pts:
                pts.sort()
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=m)
        ax.set_xscale("symlog", linthresh=4)
        ax.set_xticks(ks)
        ax.set_xticklabels([str(k) for k in ks])
        ax.set_xlabel("measured configs of the held-out task (K)")
        ax.set_ylabel("pairwise accuracy on the rest")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mtgpu")
    ap.add_argument("--db")
    ap.add_argument("--db-b")
    ap.add_argument("--holdout", default="resnet18;squeezenet1_1")
    ap.add_argument("--ks", default="0 4 8 16 32 64")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--models", default="gnn-meta gnn-transfer gnn xgb")
    ap.add_argument("--meta-args", default="")
    ap.add_argument("--pooled-args", default="")
    ap.add_argument("--transfer-args", default="")
    ap.add_argument("--models-dir", help="where trained models are kept between runs (default: OUT/models)")
    ap.add_argument("--retrain", action="store_true")
    ap.add_argument("--out", required=True)
    ap.add_argument("--command", default="")
    ap.add_argument("--report-only", action="store_true", help="rewrite the report from OUT/fewshot.json, measuring nothing")
    args = ap.parse_args()
    if args.report_only:
        with open(os.path.join(args.out, "fewshot.json")) as f:
            return report(json.load(f), args.out)
    if not args.mtgpu or not args.db:
        ap.error("--mtgpu and --db are required (unless --report-only)")
    ks = [int(k) for k in args.ks.split()]
    models = args.models.split()
    os.makedirs(args.out, exist_ok=True)
    mdir = args.models_dir or os.path.join(args.out, "models")
    os.makedirs(mdir, exist_ok=True)
    t_start = time.time()
    tmp = tempfile.mkdtemp(prefix="mtgpu-fewshot-")
    snap_a = os.path.join(tmp, "a.db")
    snapshot(args.db, snap_a)
    dev_a = devices(snap_a)[0]
    log(f"platform A: {dev_a['name']} ({dev_a['fingerprint']}), {dev_a['records']} records in {args.db}")
    snap_train = snap_a
    snap_b = None
    dev_b = None
    if args.db_b:
        snap_b = os.path.join(tmp, "b.db")
        snapshot(args.db_b, snap_b)
        dev_b = devices(snap_b)[0]
        log(f"platform B: {dev_b['name']} ({dev_b['fingerprint']}), {dev_b['records']} records in {args.db_b}")
        # Same-platform training sees both platforms' records (A's held-out workloads excluded).
        snap_train = os.path.join(tmp, "ab.db")
        snapshot(args.db, snap_train)
        subprocess.run([args.mtgpu, "merge-db", snap_b, "--db", snap_train], check=True, capture_output=True)

    manifests = {}
    rows = []
    settings = [("same", f"held out on platform A ({dev_a['fingerprint']}); pre-trained on the other workloads")]
    mf = {}
    if "gnn-meta" in models:
        mf["gnn-meta"] = os.path.join(mdir, "meta.model")
        manifests["same/gnn-meta"] = train(args, snap_train, mf["gnn-meta"], True, args.meta_args, args.holdout)
    if "gnn-transfer" in models:
        mf["gnn-transfer"] = os.path.join(mdir, "pooled.model")
        manifests["same/gnn-transfer"] = train(args, snap_train, mf["gnn-transfer"], False, args.pooled_args, args.holdout)
    for m in models:
        for k in ks:
            rows.append(evaluate(args, "same", m, k, snap_a, args.holdout, dev_a["fingerprint"], mf.get(m)))

    difference = None
    if snap_b:
        settings.append(("cross", f"pre-trained on platform B ({dev_b['fingerprint']}) only, adapted on A's held-out groups"))
        mfb = {}
        if "gnn-meta" in models:
            mfb["gnn-meta"] = os.path.join(mdir, "meta_b.model")
            manifests["cross/gnn-meta"] = train(args, snap_b, mfb["gnn-meta"], True, args.meta_args, args.holdout, dev_b["fingerprint"])
        if "gnn-transfer" in models:
            mfb["gnn-transfer"] = os.path.join(mdir, "pooled_b.model")
            manifests["cross/gnn-transfer"] = train(args, snap_b, mfb["gnn-transfer"], False, args.pooled_args, args.holdout,
                                                    dev_b["fingerprint"])
        for m in models:
            for k in ks:
                if m in mfb:
                    rows.append(evaluate(args, "cross", m, k, snap_a, args.holdout, dev_a["fingerprint"], mfb[m]))
                else:
                    # A from-scratch model learns from platform A's K alone: its cross-platform
                    # figures are its same-platform run's.
                    same = next(r for r in rows if r["setting"] == "same" and r["model"] == m and r["k"] == k)
                    rows.append(dict(same, setting="cross", copied_from="same"))
        difference = platform_difference(snap_a, dev_a["fingerprint"], snap_b, dev_b["fingerprint"])

    wall = time.time() - t_start
    meta = {"command": args.command, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpu": benchlib.cpu_model(),
            "cores": os.cpu_count(), "platform_a": dev_a, "platform_b": dev_b, "holdout": args.holdout, "ks": ks,
            "repeats": args.repeats, "seed": args.seed, "models": models, "settings": settings, "wall_s": round(wall, 1),
            "manifests": manifests, "platform_difference": difference, "runs": rows}
    return report(meta, args.out)


def report(meta, out):
    """Writes OUT/fewshot.{csv,json,md,png} from the measurements in meta."""
    rows, ks, dev_a, dev_b, difference = meta["runs"], meta["ks"], meta["platform_a"], meta["platform_b"], meta["platform_difference"]
    models = meta.get("models") or list(dict.fromkeys(r["model"] for r in rows))
    settings = meta.get("settings") or [(s, s) for s in dict.fromkeys(r["setting"] for r in rows)]
    wall = meta["wall_s"]
    with open(os.path.join(out, "fewshot.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow(r)
    with open(os.path.join(out, "fewshot.json"), "w") as f:
        json.dump(meta, f, indent=1)
    have_png = plot(rows, settings, models, ks, os.path.join(out, "fewshot.png"))

    md = ["# Few-shot accuracy on held-out convolutions", "",
          f"Measured {meta['date']} on {meta['cpu']} ({meta.get('cores', 2)} cores), {wall / 60:.0f} min. "
          f"Regenerate: `{meta['command']}`.", "",
          f"Held out of every pre-training: `{meta['holdout']}` (networks stand for all their convolutions). "
          f"Each held-out (workload, template, device) group of platform A: the model adapts on K of its measured configs "
          f"(drawn at random, {meta['repeats']} draws, seed {meta['seed']}) and ranks the rest; figures are means over groups and "
          "draws. gnn-meta adapts with the inner procedure it was meta-trained with (its model file's), gnn-transfer "
          "fine-tunes the pooled model, gnn and xgb learn from the K alone (at K=0 they rank at random).", ""]
    md.append(f"Platform A: `{dev_a['name']}` (fingerprint `{dev_a['fingerprint']}`).")
    if dev_b:
        md.append(f"Platform B: `{dev_b['name']}` (fingerprint `{dev_b['fingerprint']}`).")
    md.append("")
    for setting, title in settings:
        md += [f"## {title}", ""]
        for metric, name in METRICS:
            md += [f"{name}:", ""] + table(rows, setting, models, ks, metric) + [""]
        if setting == "cross":
            md += ["(The from-scratch models learn from platform A's K configs alone: their rows are the same runs as above.)", ""]
        md += [f"- {v}" for v in verdicts(rows, setting, ks)] + [""]
    if difference is not None:
        md += ["## How differently the two platforms rank the same configs", ""]
        if difference:
            rhos = sorted(d["spearman"] for d in difference if not math.isnan(d["spearman"]))
            med = rhos[len(rhos) // 2] if rhos else float("nan")
            out_ab = sum(d["a_best_outside_b_top"] for d in difference)
            out_ba = sum(d["b_best_outside_a_top"] for d in difference)
            md += [f"{len(difference)} (workload, template) groups with at least 8 working configs measured on both platforms "
                   f"({sum(d['configs'] for d in difference)} configs). Spearman correlation of their times: median {med:.3f}, "
                   f"range {rhos[0]:.3f} to {rhos[-1]:.3f}. A's best config is outside B's fastest 5% in {out_ab} groups "
                   f"({100 * out_ab / len(difference):.0f}%), B's best outside A's in {out_ba} ({100 * out_ba / len(difference):.0f}%) "
                   f"(a group's fastest 5% is at least its single fastest config: with "
                   f"{statistics.median(d['configs'] for d in difference):.0f} shared configs per group, the median, it is exactly that).", ""]
        else:
            md += ["No group has 8 working configs measured on both platforms.", ""]
    md += ["Files: `fewshot.csv` (one row per run), `fewshot.json` (runs, the models' manifests: data set hash, tasks, "
           "held-out workloads, hyper-parameters)" + (", `fewshot.png`." if have_png else ".")]
    with open(os.path.join(out, "fewshot.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    log(f"wrote {out}/fewshot.md")
    return 0 if all(r["status"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
