#!/usr/bin/env bash
# Tuning across MPI ranks on this machine: trials per second of
# `mpirun --oversubscribe -n R mtgpu tune` for R = 1, 2, 3 (one machine, so
# the figure shows the overhead of the ranks, not a speed-up), and the time
# rank 0 spends per trial on coordination (the search, the cost-model
# update, the database commit) against the time a trial's measurement
# takes. From those, the share of a farm's device time that would go to
# waiting on rank 0 at 8, 64 and 512 ranks (see the formula in the results).
#
#   bench/distributed/run.sh           (about 5 minutes on the 2-core machine)
#
# Environment (defaults in brackets):
#   BUILD      a build with MTGPU_MPI [build-rel]
#   WORKLOAD   [n=1,c=64,h=28,w=28,k=64,r=3,s=3,pad=1]
#   TRIALS     [32]   COST_MODEL [xgb]   RANKS ["1 2 3"]
#   OUT        [bench/distributed/results] gets distributed.csv, distributed.json, distributed.md
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD="${BUILD:-build-rel}"
WORKLOAD="${WORKLOAD:-n=1,c=64,h=28,w=28,k=64,r=3,s=3,pad=1}"
TRIALS="${TRIALS:-32}"
COST_MODEL="${COST_MODEL:-xgb}"
RANKS="${RANKS:-1 2 3}"
OUT="${OUT:-bench/distributed/results}"
mtgpu="$PWD/$BUILD/mtgpu"
[ -x "$mtgpu" ] || { echo "no $mtgpu: build it first (cmake -S . -B $BUILD -DCMAKE_BUILD_TYPE=Release && cmake --build $BUILD)" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "no mpirun: install openmpi-bin" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d /tmp/mtgpu-bench-distributed-XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$OUT"
for r in $RANKS; do
  # Cold caches each run, ours and PoCL's, so that every run compiles what it measures.
  export MTGPU_CACHE_DIR="$work/cache-$r" POCL_CACHE_DIR="$work/pocl-$r"
  mpirun --oversubscribe -x MTGPU_CACHE_DIR -x POCL_CACHE_DIR -n "$r" "$mtgpu" tune "$WORKLOAD" --trials "$TRIALS" --cost-model "$COST_MODEL" \
    --early-stop 0 --seed 7 --db "$work/r$r.db" --json | grep '"type": "summary"' >"$work/r$r.json"
  echo "ranks $r: $(cut -c1-200 "$work/r$r.json")" >&2
done
python3 - "$work" "$OUT" "$WORKLOAD" "$TRIALS" "$COST_MODEL" "$RANKS" <<'PY'
import json, subprocess, sys, datetime
work, out, wl, trials, cm, ranks = sys.argv[1:7]
ranks = [int(r) for r in ranks.split()]
rows = []
for r in ranks:
    s = json.load(open(f"{work}/r{r}.json"))
    n = s["measured_this_run"]
    coord = s["search_s"] + s["model_s"] + s["commit_s"]
    rows.append(dict(ranks=r, trials=n, wall_s=s["wall_s"], trials_per_s=n / s["wall_s"], search_ms=1e3 * s["search_s"] / n,
                     model_ms=1e3 * s["model_s"] / n, commit_ms=1e3 * s["commit_s"] / n, coord_ms=1e3 * coord / n,
                     measure_ms=1e3 * s["measure_s"] / n, best_ms=min(t["best_ms"] for t in s["tasks"])))
base = rows[0]
o = base["coord_ms"]      # rank 0's work per trial
m = base["measure_ms"]    # one trial's compile and timing on one device (one process, nothing else measuring)
proj = []
for R in (8, 64, 512):
    sync = R * o / (R * o + m)          # batch of R per round, rank 0 works while the ranks wait
    piped = max(0.0, 1 - m / (R * o))   # rank 0 overlapping the ranks' measurements: waits only once it is the bottleneck
    proj.append(dict(ranks=R, waiting_sync=sync, waiting_pipelined=piped))
sys.path.insert(0, "bench/common")
import benchlib
cpu = benchlib.cpu_model()
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
date = datetime.date.today().isoformat()
with open(f"{out}/distributed.csv", "w") as f:
    keys = list(rows[0].keys())
    f.write(",".join(keys) + "\n")
    for r in rows: f.write(",".join(f"{r[k]:.6g}" if isinstance(r[k], float) else str(r[k]) for k in keys) + "\n")
json.dump(dict(date=date, cpu=cpu, commit=commit, workload=wl, trials=int(trials), cost_model=cm, runs=rows,
               per_trial_coord_ms=o, per_trial_measure_ms=m, projection=proj), open(f"{out}/distributed.json", "w"), indent=1)
L = [f"# Tuning across MPI ranks on one machine", "",
     f"{date}, {cpu}, 2 cores, commit {commit}; PoCL 3.1 (OpenCL on the CPU), Open MPI 4.1 (`mpirun --oversubscribe`).",
     f"`mtgpu tune {wl} --trials {trials} --cost-model {cm} --early-stop 0 --seed 7`, cold kernel caches (ours and PoCL's) per run",
     "(`bench/distributed/run.sh`). With R ranks, rank 0 searches and commits and ranks 1..R-1 measure; with one rank",
     "the process measures itself. Every rank shares the same two cores, so the figures show the overhead of the ranks,",
     "not a speed-up.", "",
     "| ranks | trials | wall s | trials/s | rank 0 per trial: search ms | model update ms | commit ms | total ms | measuring ms per trial | best ms |",
     "|---|---|---|---|---|---|---|---|---|---|"]
for r in rows:
    L.append(f"| {r['ranks']} | {r['trials']} | {r['wall_s']:.1f} | {r['trials_per_s']:.2f} | {r['search_ms']:.1f} | {r['model_ms']:.1f} | "
             f"{r['commit_ms']:.1f} | {r['coord_ms']:.1f} | {r['measure_ms']:.0f} | {r['best_ms']:.4f} |")
L += ["", "## What a GPU farm would wait for", "",
      f"From the one-rank run: rank 0's coordination per trial o = {o:.1f} ms (search {base['search_ms']:.1f}, model update "
      f"{base['model_ms']:.1f}, commit {base['commit_ms']:.1f}), a trial's compile and timing m = {m:.0f} ms. "
      "Computed on paper, not simulated:", "",
      "- **As built** (a round deals a batch of R configs, one per measuring rank; rank 0 searches, commits and updates the",
      "  model while the ranks wait): each round takes R·o on rank 0 and m on the ranks, so the share of the ranks' time",
      "  spent waiting is R·o / (R·o + m).",
      "- **Pipelined** (rank 0 drafts the next batch while the ranks measure): the ranks wait only once rank 0 is the",
      "  bottleneck, max(0, 1 − m / (R·o)).", "",
      "This assumes o stays what it was here as the records grow (xgb's refit grows with the records of a task) and that a",
      "GPU trial costs about what a CPU one does here (on a GPU the timing is shorter and the compile about the same).",
      "A round holds `--batch` configs (8 by default): with more measuring ranks than that, the rest idle, so a farm of R",
      "ranks tunes with `--batch R` or more.", "",
      "| ranks | waiting, as built | waiting, pipelined |", "|---|---|---|"]
for p in proj:
    L.append(f"| {p['ranks']} | {100*p['waiting_sync']:.1f}% | {100*p['waiting_pipelined']:.1f}% |")
open(f"{out}/distributed.md", "w").write("\n".join(L) + "\n")
print("\n".join(L))
PY
