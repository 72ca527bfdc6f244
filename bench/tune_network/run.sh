#!/usr/bin/env bash
# Tunes a whole network with `mtgpu tune` at its defaults (the tuning cost a
# user sees: they must finish within 30 minutes on the 2-core machine), on a
# fresh records database, then times the same convolutions with oneDNN (blocked
# "any" layouts and plain NCHW) right after, and writes
# bench/tune_network/results/tune_<network>.md and .json: tuned network convolution time
# against oneDNN, wall time, trials, measurements/s, and a per-task table.
#
#   bench/tune_network/run.sh [NETWORK]        (default resnet50)
#
# Environment: MTGPU_TUNE_ARGS extra arguments for `mtgpu tune` (word-split;
# unset: the defaults), e.g. MTGPU_TUNE_ARGS="--trials 4 --time-limit 120" for a
# smoke test; ONEDNN_REPEATS (default 15); OUT (default bench/tune_network/results);
# BUILD_DIR (default build-bench, relative to the repository root);
# DB_OUT=PATH keeps the tuned records database there (e.g. for `mtgpu run`);
# WARM_CACHE=1 to tune with the user's compiled-kernel caches (mtgpu's and
# PoCL's) instead of fresh empty ones: by default the tuning starts cold, as a
# first run on a new machine does, since cache hits skip most of the compile time.
# oneDNN timings are skipped, with a note, when bench_onednn_convs was not built
# (oneDNN missing: bench/common/setup.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD="${BUILD_DIR:-build-bench}"
NET="${1:-resnet50}"
OUT="${OUT:-bench/tune_network/results}"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DMTGPU_TESTS=OFF >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target mtgpu_cli mtgpu_worker >/dev/null
have_dnnl=0
if ! grep -qE '^DNNL_(LIBRARY|INCLUDE_DIR):[A-Z]+=.*NOTFOUND' "$BUILD/CMakeCache.txt"; then
  cmake --build "$BUILD" -j"$(nproc)" --target bench_onednn_convs >/dev/null
  have_dnnl=1
fi
mkdir -p "$OUT"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/mtgpu-tune-network.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

read -r -a tune_args <<<"${MTGPU_TUNE_ARGS:-}"
cache="cold"
cache_env=(MTGPU_CACHE_DIR="$tmp/kernels" POCL_CACHE_DIR="$tmp/pocl")
if [ "${WARM_CACHE:-0}" = 1 ]; then cache="warm"; cache_env=(); fi
echo "tune_network: mtgpu tune $NET --json --db <fresh> ${MTGPU_TUNE_ARGS:-} (kernel caches: $cache)" >&2
t0=$(date +%s.%N)
tune_rc=0
env "${cache_env[@]}" "$BUILD"/mtgpu tune "$NET" --json --db "$tmp/tune.db" "${tune_args[@]}" >"$tmp/tune.jsonl" || tune_rc=$?
t1=$(date +%s.%N)
if [ "$tune_rc" -ne 0 ]; then
  echo "tune_network: mtgpu tune failed (exit $tune_rc)" >&2
  exit 1
fi
if [ -n "${DB_OUT:-}" ]; then
  sqlite3 "$tmp/tune.db" ".backup '$DB_OUT'" && echo "tune_network: records kept in $DB_OUT" >&2
fi
if [ "$have_dnnl" -eq 1 ]; then
  for layout in any nchw; do
    echo "tune_network: bench_onednn_convs $NET --layout $layout" >&2
    "$BUILD"/bench_onednn_convs "$NET" --layout "$layout" --repeats "${ONEDNN_REPEATS:-15}" --json >"$tmp/onednn_$layout.jsonl"
  done
else
  echo "tune_network: bench_onednn_convs not built (oneDNN missing; bench/common/setup.sh): no oneDNN columns" >&2
fi

NET="$NET" OUT="$OUT" TMPD="$tmp" T0="$t0" T1="$t1" TUNE_ARGS="${MTGPU_TUNE_ARGS:-}" CACHE="$cache" python3 - <<'PY'
import json, os, time

net, out, tmp = os.environ["NET"], os.environ["OUT"], os.environ["TMPD"]
process_wall = float(os.environ["T1"]) - float(os.environ["T0"])
tune_args = os.environ["TUNE_ARGS"]
cache = os.environ["CACHE"]

summary, nrecords, nerrors = None, 0, 0
with open(os.path.join(tmp, "tune.jsonl")) as f:
    for line in f:
        line = line.strip()
        if not line.startswith("{"):
            continue
        obj = json.loads(line)
        if obj.get("type") == "summary":
            summary = obj
        elif obj.get("type") == "record":
            nrecords += 1
            nerrors += obj.get("status") != "ok"
if summary is None:
    raise SystemExit("tune_network: no summary line in mtgpu tune's output")

def load_onednn(layout):
    path = os.path.join(tmp, f"onednn_{layout}.jsonl")
    if not os.path.exists(path):
        return None
    tasks, summ = {}, None
    with open(path) as f:
        for line in f:
            obj = json.loads(line)
            if obj["type"] == "task":  # keyed by the mtgpu task that runs the layer
                tasks[obj.get("kernel_workload", obj["workload"])] = obj
            else:
                summ = obj
    return {"summary": summ, "tasks": tasks}

dnnl = {layout: load_onednn(layout) for layout in ("any", "nchw")}

def ratio(a, b):
    return a / b if a and b else None

def fmt(x, spec=".3f", none="-"):
    return none if x is None else format(x, spec)

net_ms = summary["network_ms"] or None
flops = sum(t["flops"] * t["count"] for t in summary["tasks"])
wall = summary["wall_s"]
measured = summary["measured_this_run"]
rate = measured / wall if wall > 0 else None
dnnl_net = {k: (v["summary"]["network_ms"] or None) if v and v["summary"] else None for k, v in dnnl.items()}

tasks = []
for i, t in enumerate(summary["tasks"]):
    row = {"task": i, "workload": t["workload"], "count": t["count"], "flops": t["flops"], "trials": t["trials"], "errors": t["errors"],
           "mtgpu_ms": t["best_ms"] or None, "mtgpu_gflops": t["gflops"] or None, "template": t["template"], "config": t["config"]}
    for layout in ("any", "nchw"):
        d = dnnl[layout]["tasks"].get(t["workload"]) if dnnl[layout] else None
        row[f"onednn_{layout}_ms"] = d["median_ms"] if d else None
        row[f"onednn_{layout}_impl"] = d["impl"] if d else None
        row[f"ratio_{layout}"] = ratio(row["mtgpu_ms"], row[f"onednn_{layout}_ms"])
    tasks.append(row)

result = {
    "network": net,
    "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    "tune_args": tune_args,
    "kernel_caches": cache,
    "device": summary["device"],
    "mtgpu_network_ms": net_ms,
    "mtgpu_gflops": flops / (net_ms * 1e6) if net_ms else None,
    "onednn_any_ms": dnnl_net["any"],
    "onednn_nchw_ms": dnnl_net["nchw"],
    "ratio_any": ratio(net_ms, dnnl_net["any"]),
    "ratio_nchw": ratio(net_ms, dnnl_net["nchw"]),
    "tune_wall_s": wall,
    "process_wall_s": process_wall,
    "trials_done": summary["trials_done"],
    "measured_this_run": measured,
    "failed_measurements": nerrors,
    "measurements_per_s": rate,
    "timed_out": summary["timed_out"],
    "interrupted": summary["interrupted"],
    "onednn": {k: v["summary"] if v else None for k, v in dnnl.items()},
    "tasks": tasks,
    "tune_summary": summary,
}
with open(os.path.join(out, f"tune_{net}.json"), "w") as f:
    json.dump(result, f, indent=1)

od = result["onednn"]["any"] or result["onednn"]["nchw"]
L = []
L.append(f"# Tuning {net} with `mtgpu tune` at its defaults, against oneDNN\n")
L.append(f"Generated {result['date']} by `bench/tune_network/run.sh {net}`: `mtgpu tune {net} --json --db <fresh database>"
         + (f" {tune_args}" if tune_args else "") + "`, then `bench_onednn_convs` on the same convolutions right after. "
         + ("Compiled-kernel caches (mtgpu's and PoCL's) start empty, as on a first run." if cache == "cold"
            else "Compiled-kernel caches: the user's (warm; compile time mostly skipped)."))
L.append(f"Device: {summary['device']} ({summary['fingerprint']}). "
         + (f"oneDNN {od['version']}, fp32 forward inference, no bias, median of {od['repeats']} calls after warm-up, "
            f"OMP_NUM_THREADS={od['omp_num_threads'] or 'unset (all cores)'}." if od else "oneDNN: not built (bench/common/setup.sh installs it)."))
L.append("Network time: sum over the unique convolutions of best (or median) time x occurrences. Ratio: mtgpu / oneDNN (above 1: mtgpu slower).\n")
L.append("| | value |")
L.append("|---|---|")
L.append(f"| mtgpu tuned convolutions | {fmt(net_ms)} ms" + (f" ({result['mtgpu_gflops']:.1f} GFLOP/s)" if net_ms else " (some task has no valid config)") + " |")
L.append(f"| oneDNN, any layout | {fmt(dnnl_net['any'])} ms |")
L.append(f"| oneDNN, NCHW | {fmt(dnnl_net['nchw'])} ms |")
L.append(f"| ratio mtgpu / oneDNN any | {fmt(result['ratio_any'], '.2f')} |")
L.append(f"| ratio mtgpu / oneDNN NCHW | {fmt(result['ratio_nchw'], '.2f')} |")
stop = " (time limit reached)" if summary["timed_out"] else " (interrupted)" if summary["interrupted"] else ""
L.append(f"| tuning wall time | {wall:.0f} s{stop}; whole `mtgpu tune` process {process_wall:.0f} s |")
L.append(f"| trials measured | {measured} ({nerrors} failed) |")
L.append(f"| measurements/s | {fmt(rate, '.2f')} |")
L.append("")
L.append("| task | workload | count | trials | errors | template | mtgpu best ms | mtgpu GFLOP/s | oneDNN any ms | ratio | oneDNN NCHW ms | ratio |")
L.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in tasks:
    L.append(f"| {r['task']} | `{r['workload']}` | {r['count']} | {r['trials']} | {r['errors']} | {r['template'] or '-'} | {fmt(r['mtgpu_ms'], '.4f')} | "
             f"{fmt(r['mtgpu_gflops'], '.1f')} | "
             f"{fmt(r['onednn_any_ms'], '.4f')} | {fmt(r['ratio_any'], '.2f')} | {fmt(r['onednn_nchw_ms'], '.4f')} | {fmt(r['ratio_nchw'], '.2f')} |")
L.append("")
with open(os.path.join(out, f"tune_{net}.md"), "w") as f:
    f.write("\n".join(L))

print(f"{net}: mtgpu {fmt(net_ms)} ms | oneDNN any {fmt(dnnl_net['any'])} ms (x{fmt(result['ratio_any'], '.2f')}) | "
      f"NCHW {fmt(dnnl_net['nchw'])} ms (x{fmt(result['ratio_nchw'], '.2f')}) | {measured} trials in {wall:.0f} s, {fmt(rate, '.2f')}/s")
print(f"wrote {out}/tune_{net}.md and {out}/tune_{net}.json")
PY
