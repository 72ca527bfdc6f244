#!/usr/bin/env bash
# Training time on the whole data set: `mtgpu train`
# of each graph cost model on every record of DB, timed, with the process's
# peak resident memory (GNU time). Writes $OUT/cm_train.md and cm_train.json.
#
#   bench/cm_train/run.sh [DB]     (default data/opencl_dataset.db; about a minute on 2 cores)
#
# Environment (defaults in brackets): MODELS ["gnn gnn-shared mlp"], EPOCHS
# [30, mtgpu train's default], OUT [bench/cm_train/results], BUILD_DIR [build-bench].
# The trained files go to a temporary directory: the shipped models
# (data/opencl_gnn_meta.model, data/opencl_gnn_pooled.model) are made with a
# held-out split written in their manifests (data/README.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
DB="${1:-data/opencl_dataset.db}"
MODELS="${MODELS:-gnn gnn-shared mlp}"
EPOCHS="${EPOCHS:-30}"
OUT="${OUT:-bench/cm_train/results}"
BUILD="${BUILD_DIR:-build-bench}"
[ -f "$DB" ] || { echo "cm_train: no data set at $DB (bench/dataset/run.sh makes one)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "cm_train: needs GNU time (/usr/bin/time; Debian package 'time')" >&2; exit 1; }
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DMTGPU_TESTS=OFF >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target mtgpu_cli >/dev/null
work=$(mktemp -d /tmp/mtgpu-cm-train-XXXXXX)
trap 'rm -rf "$work"' EXIT
for m in $MODELS; do
  /usr/bin/time -f '%e %M' -o "$work/$m.time" "$BUILD"/mtgpu train --db "$DB" --out "$work/$m.model" --cost-model "$m" \
    --epochs "$EPOCHS" --json >"$work/$m.json"
  echo "cm_train: $m done" >&2
done
python3 - "$work" "$DB" "$EPOCHS" "$OUT" "$(nproc)" $MODELS <<'PY'
import json, os, sys, time
work, db, epochs, out, cores, models = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6:]
rows = []
for m in models:
    res = [json.loads(l) for l in open(f"{work}/{m}.json") if l.startswith("{")][-1]
    wall, rss_kib = open(f"{work}/{m}.time").read().split()[-2:]
    rows.append({"model": m, "result": res, "process_wall_s": float(wall), "peak_rss_mib": int(rss_kib) / 1024})
date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
os.makedirs(out, exist_ok=True)
json.dump({"database": db, "epochs": int(epochs), "cores": int(cores), "date": date, "runs": rows}, open(f"{out}/cm_train.json", "w"), indent=1)
md = ["# Cost-model training time on the data set\n",
      f"Generated {date} by `bench/cm_train/run.sh {db}`: `mtgpu train --db {db} --cost-model M --epochs {epochs}` "
      f"on every record, {cores} cores. Train s: the training itself (mtgpu's own figure: graph encoding and the epochs); "
      "process s and peak RSS: the whole process (GNU time).\n",
      "| model | parameters | records | workloads | train s | process s | peak RSS (MiB) |", "|---|---|---|---|---|---|---|"]
for r in rows:
    t = r["result"]
    md.append(f"| {r['model']} | {t['params']} | {t['samples']} | {t['workloads']} | {t['train_s']:.1f} | "
              f"{r['process_wall_s']:.1f} | {r['peak_rss_mib']:.0f} |")
open(f"{out}/cm_train.md", "w").write("\n".join(md) + "\n")
print("\n".join(md))
PY
