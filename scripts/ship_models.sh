#!/usr/bin/env bash
# Trains the cost models shipped in data/ and writes their manifests:
# data/opencl_gnn_meta.model (`mtgpu train --meta`, the default start of
# `tune --cost-model gnn-meta`) and data/opencl_gnn_pooled.model (`mtgpu
# train`, the start of gnn-transfer), both on the records of the two
# platforms (data/opencl_dataset.db merged with data/opencl_1cu_dataset.db)
# less the held-out networks, then scores each on the held-out convolutions
# of platform A (zero-shot and after adapting on 16 measured configs) and
# adds those figures to its manifest as "held_out_metrics".
#
#   scripts/ship_models.sh [BUILD_DIR]     (default build-bench; about 6 minutes on 2 cores)
#
# Environment: HOLDOUT ["resnet18;squeezenet1_1"], the networks (or
# workloads) no shipped model may see (the benchmarks check it); OUT [data],
# where the models and manifests go.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build-bench}"
holdout="${HOLDOUT:-resnet18;squeezenet1_1}"
out="${OUT:-data}"
mkdir -p "$out"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DMTGPU_TESTS=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target mtgpu_cli mtgpu_worker >/dev/null
mtgpu="$build/mtgpu"
work="$(mktemp -d "${TMPDIR:-/tmp}/mtgpu-ship.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# A consistent copy of each database (a collector may still be writing one), then one file of both platforms.
python3 - "$work" <<'PY'
import sqlite3, sys
for src, dst in (("data/opencl_dataset.db", "ab.db"), ("data/opencl_1cu_dataset.db", "b.db")):
    s = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    d = sqlite3.connect(f"{sys.argv[1]}/{dst}")
    s.backup(d)
    s.close()
    d.close()
PY
"$mtgpu" merge-db "$work/b.db" --db "$work/ab.db" >/dev/null
device_a=$(python3 -c "import sqlite3; print(sqlite3.connect('file:data/opencl_dataset.db?mode=ro', uri=True).execute(\"SELECT device FROM records WHERE status = 'ok' GROUP BY device ORDER BY count(*) DESC LIMIT 1\").fetchone()[0])")
echo "ship_models: training on $(sqlite3 "$work/ab.db" 'SELECT count(*) FROM records') records, holding out $holdout" >&2
"$mtgpu" train --db "$work/ab.db" --out "$work/meta.model" --holdout "$holdout" --manifest "$work/meta.model.manifest.json" --meta --json >"$work/meta.log" &
meta_pid=$!
"$mtgpu" train --db "$work/ab.db" --out "$work/pooled.model" --holdout "$holdout" --manifest "$work/pooled.model.manifest.json" --json >"$work/pooled.log"
wait "$meta_pid"
for m in meta pooled; do
  kind=$([ "$m" = meta ] && echo gnn-meta || echo gnn-transfer)
  for k in 0 16; do
    "$mtgpu" eval-model --db "$work/ab.db" --cost-model "$kind" --model "$work/$m.model" --holdout "$holdout" --device "$device_a" \
      --adapt-k "$k" --adapt-repeats 3 --json | grep '^{' | tail -1 >"$work/$m.k$k.json"
  done
  python3 - "$work" "$m" "$kind" "$holdout" "$device_a" <<'PY'
import json, sys
work, m, kind, holdout, device = sys.argv[1:]
path = f"{work}/{m}.model.manifest.json"
man = json.load(open(path))
metrics = []
for k in (0, 16):
    r = json.load(open(f"{work}/{m}.k{k}.json"))
    metrics.append({"k": k, "cost_model": kind, "device": device, "holdout": holdout, "adapt_repeats": 3,
                    **{f: r.get(f) for f in ("groups", "pairwise_acc", "spearman", "top1", "top5")}})
man["held_out_metrics"] = metrics
# The files as shipped, not the scratch copies they were made from.
man["model"] = f"data/opencl_gnn_{m}.model"
man["dataset"]["path"] = "data/opencl_dataset.db merged with data/opencl_1cu_dataset.db (mtgpu merge-db)"
with open(path + ".tmp", "w") as f:
    json.dump(man, f, indent=2)
    f.write("\n")
PY
  mv "$work/$m.model.manifest.json.tmp" "$work/$m.model.manifest.json"
done
for m in meta pooled; do
  cp "$work/$m.model" "$out/opencl_gnn_$m.model.tmp" && mv "$out/opencl_gnn_$m.model.tmp" "$out/opencl_gnn_$m.model"
  cp "$work/$m.model.manifest.json" "$out/opencl_gnn_$m.model.manifest.json"
done
for m in meta pooled; do
  python3 -c "
import json, sys
m = json.load(open('$out/opencl_gnn_$m.model.manifest.json'))
for r in m['held_out_metrics']:
    print(f\"ship_models: opencl_gnn_$m.model: K={r['k']}: pairwise {r['pairwise_acc']:.3f}, Spearman {r['spearman']:.3f}, top-1 {r['top1']:.3f}, top-5 {r['top5']:.3f} over {r['groups']} held-out groups\")"
done
