#!/usr/bin/env bash
# The GPU check: on a machine with one NVIDIA GPU, in under 8
# minutes, writes into OUTDIR (at most 8 files, for the device tool):
#   summary.md              what was measured, in short (also printed)
#   tests.log               the CUDA tests: kernels of every template on the
#                           harness's workloads against the CPU reference and
#                           cuDNN, event timings, the cubin cache, GNN tests and
#                           GNN scores on the GPU against the CPU
#   devices.json            `mtgpu devices --json`
#   resnet50_vs_cudnn.csv   per ResNet-50 convolution: mtgpu's tuned time beside
#                           cuDNN's (strict fp32 and default math), and the sums
#   tune_resnet50.jsonl     `mtgpu tune resnet50 --json` on the GPU
#   cm_speed.json           GNN candidates scored per second (bench_cm_speed)
#   gpu_records.db          every measurement: the tuning run and a data set of
#                           random configs of many network convolutions (for
#                           training the cost model across devices)
#   run.log                 this script's own log
#
#   bench/gpu/run.sh OUTDIR
#
# Binaries: .gpu/bin from bench/gpu/prepare.sh (run on the development
# machine, then carry .gpu), else a build here (needs the project's build
# dependencies). Budget knobs (seconds): TUNE_S (default 150), DATASET_S
# (default 120), TEST_S (default 150 per test binary); TRIALS (default 368:
# 16 per ResNet-50 task). With no GPU it still runs what it can and says
# what it skipped; its exit status is 1 when a step that needs the GPU failed.
set -uo pipefail
OUT="${1:?usage: bench/gpu/run.sh OUTDIR}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
cd "$(dirname "$0")/../.."
ROOT="$(pwd)"
LOG="$OUT/run.log"
: >"$LOG"
t_start=$(date +%s)
say() { echo "gpu: $*" | tee -a "$LOG" >&2; }
elapsed() { echo $(($(date +%s) - t_start)); }
status=0

# ---- binaries and libraries ----
if [ -x .gpu/bin/mtgpu ]; then
  BIN="$ROOT/.gpu/bin"
  if [ -f .gpu/deps.tar.xz ]; then
    DEPS="${TMPDIR:-/tmp}/mtgpu-gpu-deps"
    mkdir -p "$DEPS" && tar -C "$DEPS" -xJf .gpu/deps.tar.xz
    export LD_LIBRARY_PATH="$DEPS/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  say "prebuilt binaries from .gpu (commit $(cat .gpu/commit 2>/dev/null || echo '?'))"
else
  say "no .gpu/bin: building here"
  cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DMTGPU_CUDA=ON >>"$LOG" 2>&1 &&
    cmake --build build-gpu -j"$(nproc)" >>"$LOG" 2>&1 || { say "build failed (see run.log)"; exit 1; }
  BIN="$ROOT/build-gpu"
  for t in build-gpu/tests/test_cuda build-gpu/tests/test_cuda_gpu build-gpu/tests/test_gnn build-gpu/tests/test_gnn_gpu; do [ -x "$t" ] && ln -sf "$ROOT/$t" "$BIN/"; done
fi
# CUDA's own libraries: the toolkit's, and cuDNN / cuBLAS where pip wheels put them.
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d"
done
for pkg in nvidia.cudnn nvidia.cublas nvidia.cuda_nvrtc nvidia.nvjitlink; do
  d=$(python3 -c "import importlib, os; m = importlib.import_module('$pkg'); print(os.path.join(list(m.__path__)[0], 'lib'))" 2>/dev/null) &&
    [ -d "$d" ] && LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d"
done
export LD_LIBRARY_PATH
export MTGPU_WORKER="$BIN/mtgpu-worker" MTGPU_CUDA_MODULE="$BIN/libmtgpu_cuda.so"
export MTGPU_CACHE_DIR="${TMPDIR:-/tmp}/mtgpu-gpu-kernels"
MTGPU="$BIN/mtgpu"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader >>"$LOG" 2>&1 || say "nvidia-smi: not available"

# ---- devices ----
"$MTGPU" devices --json >"$OUT/devices.json" 2>>"$LOG"
have_gpu=0
if grep -q '"backend": *"cuda"' "$OUT/devices.json"; then have_gpu=1; fi
say "devices: $(grep -c '"backend"' "$OUT/devices.json") listed; CUDA device: $([ $have_gpu = 1 ] && echo yes || echo no)"
"$MTGPU" devices >>"$LOG" 2>&1

# ---- tests ----
: >"$OUT/tests.log"
tests_summary=""
for t in test_cuda test_cuda_gpu test_gnn test_gnn_gpu; do
  [ -x "$BIN/$t" ] || { tests_summary+="$t: not built; "; continue; }
  start=$(date +%s)
  CMOCKA_MESSAGE_OUTPUT=STDOUT timeout "${TEST_S:-150}" "$BIN/$t" >>"$OUT/tests.log" 2>&1
  rc=$?
  tests_summary+="$t: exit $rc in $(($(date +%s) - start)) s; "
  [ $rc -eq 0 ] || status=1
done
say "tests: $tests_summary(details: tests.log)"

DB="$OUT/gpu_records.db"
if [ $have_gpu = 1 ]; then
  # ---- ResNet-50 on the GPU, beside cuDNN ----
  say "tuning resnet50 on cuda:0 (${TRIALS:-368} trials, at most ${TUNE_S:-150} s)"
  "$MTGPU" tune resnet50 --device cuda:0 --trials "${TRIALS:-368}" --time-limit "${TUNE_S:-150}" --db "$DB" --json \
    >"$OUT/tune_resnet50.jsonl" 2>>"$LOG" || { say "mtgpu tune failed"; status=1; }
  say "timing the best config of each task beside cuDNN"
  echo "workload,count,template,config,mtgpu_ms,cudnn_strict_ms,cudnn_default_ms,ratio_strict,ratio_default" >"$OUT/resnet50_vs_cudnn.csv"
  "$MTGPU" best resnet50 --db "$DB" --device cuda:0 --json 2>>"$LOG" |
    python3 -c '
import json, subprocess, sys
mtgpu, csv = sys.argv[1], open(sys.argv[2], "a")
for line in sys.stdin:
    if not line.startswith("{"): continue
    b = json.loads(line)
    r = subprocess.run([mtgpu, "conv", b["workload"], "--device", "cuda:0", "--template", b["template"], "--config", b["config"],
                        "--reference", "--json"], capture_output=True, text=True)
    rows = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
    c = rows[-1] if rows else {}
    def f(k): v = c.get(k); return "" if v is None else "%.6g" % v
    ms, s, d = c.get("ms"), c.get("cudnn_ms"), c.get("cudnn_default_ms")
    ratio = lambda a, b: "%.3f" % (a / b) if a and b else ""
    csv.write(",".join(['"%s"' % b["workload"], str(b["count"]), b["template"], '"%s"' % b["config"], f("ms"), f("cudnn_ms"),
                        f("cudnn_default_ms"), ratio(ms, s), ratio(ms, d)]) + "\n")
    if r.returncode: sys.stderr.write("conv %s: exit %d: %s\n" % (b["workload"], r.returncode, r.stderr[-300:]))
' "$MTGPU" "$OUT/resnet50_vs_cudnn.csv" 2>>"$LOG" || status=1
  # ---- a data set of random configs, as much as the budget allows ----
  say "data set: random configs of network convolutions for ${DATASET_S:-120} s"
  ds_end=$(($(date +%s) + ${DATASET_S:-120}))
  for net in resnet50 mobilenet_v2 resnet18 vgg16 squeezenet1_1; do
    "$MTGPU" tasks "$net" --json 2>/dev/null | python3 -c 'import json,sys; [print(json.loads(l)["workload"]) for l in sys.stdin if l.startswith("{") and "workload" in l]'
  done | awk '!seen[$0]++' >"${TMPDIR:-/tmp}/mtgpu-gpu-workloads"
  while read -r wl; do
    left=$((ds_end - $(date +%s)))
    [ $left -gt 5 ] || break
    "$MTGPU" tune "$wl" --device cuda:0 --cost-model random --trials 48 --early-stop 0 --time-limit "$left" --db "$DB" --seed 1 \
      >/dev/null 2>>"$LOG" || say "data set: $wl failed"
  done <"${TMPDIR:-/tmp}/mtgpu-gpu-workloads"
else
  say "no CUDA device: skipping the ResNet-50 tuning, the cuDNN comparison and the data set"
  status=1
fi

# ---- GNN scoring speed ----
if [ -x "$BIN/bench_cm_speed" ]; then
  say "GNN scoring speed (bench_cm_speed)"
  timeout 120 "$BIN/bench_cm_speed" --out "$OUT" >>"$LOG" 2>&1 || say "bench_cm_speed failed or timed out"
  rm -f "$OUT/cm_speed.md"
fi

# ---- summary ----
python3 - "$OUT" "$tests_summary" "$(elapsed)" <<'PY' | tee "$OUT/summary.md"
import csv, json, os, sqlite3, sys
out, tests, wall = sys.argv[1], sys.argv[2], sys.argv[3]
print("# GPU check (bench/gpu/run.sh)\n")
try:
    devs = [json.loads(l) for l in open(os.path.join(out, "devices.json")) if l.strip().startswith("{")]
    for note in (n for d in devs for n in d.get("notes", [])):
        print(f"- note: {note}")
    for d in (d for d in devs if "backend" in d):
        print(f"- device {d.get('backend')}:{d.get('index')}: {d.get('name')} ({d.get('platform')}), driver {d.get('driver')}")
except Exception as e:
    print(f"- devices: unreadable ({e})")
print(f"- tests: {tests}")
path = os.path.join(out, "resnet50_vs_cudnn.csv")
if os.path.exists(path):
    rows = list(csv.DictReader(open(path)))
    def tot(k):
        v = [float(r[k]) * int(r["count"]) for r in rows if r[k]]
        return sum(v) if len(v) == len(rows) and rows else None
    m, s, d = tot("mtgpu_ms"), tot("cudnn_strict_ms"), tot("cudnn_default_ms")
    fmt = lambda x: "-" if x is None else f"{x:.3f} ms"
    print(f"- ResNet-50 convolutions ({len(rows)} tasks, summed with occurrences): mtgpu {fmt(m)}, cuDNN strict fp32 {fmt(s)}, "
          f"cuDNN default math {fmt(d)}" + (f"; ratio to strict {m / s:.2f}" if m and s else ""))
db = os.path.join(out, "gpu_records.db")
if os.path.exists(db):
    c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    n, w = c.execute("select count(*), count(distinct workload_id) from records").fetchone()
    print(f"- records: {n} measurements of {w} workloads in gpu_records.db")
path = os.path.join(out, "cm_speed.json")
if os.path.exists(path):
    try:
        j = json.load(open(path))
        print(f"- cm_speed.json: {json.dumps(j)[:400]}")
    except Exception as e:
        print(f"- cm_speed.json unreadable: {e}")
print(f"- wall time: {wall} s")
PY
exit $status
