#!/usr/bin/env bash
# Tuning throughput of two builds side by side: how many seconds `mtgpu tune`
# takes for the same random-search trials of one convolution, with cold
# kernel caches, for the working tree and for a base revision (BASE). Random search
# with the same seed measures the same configs in both builds, so the ratio is
# the speed of compiling and measuring alone. The builds run in turns, ROUNDS
# times each (the machine is shared: turns spread its noise over both).
#
#   bench/tune_speed/run.sh            (about 10 minutes on the 2-core machine)
#
# Environment (defaults in brackets):
#   BASE       git revision to compare with [8afaa91, the last commit before the
#              compiler processes and the PoCL cache change]
#   WORKLOAD   [n=1,c=256,h=14,w=14,k=256,r=3,s=3,pad=1] (ResNet-50's 3x3 at 14x14)
#   TRIALS     [24]    ROUNDS [3]
#   HEAD_ARGS  extra `mtgpu tune` arguments for the working tree's build
#              [--templates direct,depthwise,gemm: the base's templates, so that
#              both builds measure the same configs]
#   OUT        [bench/tune_speed/results] gets tune_speed.csv and tune_speed.md
set -euo pipefail
cd "$(dirname "$0")/../.."
BASE="${BASE:-8afaa91}"
WORKLOAD="${WORKLOAD:-n=1,c=256,h=14,w=14,k=256,r=3,s=3,pad=1}"
TRIALS="${TRIALS:-24}"
ROUNDS="${ROUNDS:-3}"
read -r -a head_args <<<"${HEAD_ARGS---templates direct,depthwise,gemm}"
OUT="${OUT:-bench/tune_speed/results}"
. bench/common/two_builds.sh
bench_base_and_head mtgpu-tune-speed "$BASE"

csv="$OUT/tune_speed.csv"
mkdir -p "$OUT"
# configs: a hash of the configs measured, equal for both builds of a round when they measured the same ones.
echo "build,revision,round,wall_s,trials,build_s_sum,best_gflops,configs" >"$csv"
for round in $(seq 1 "$ROUNDS"); do
  for b in base head; do
    rev=$([ $b = base ] && echo "$base_rev" || echo "$head_rev")
    d="$work/run-$b-$round"
    mkdir -p "$d"
    # Cold caches: ours and PoCL's.
    extra=()
    [ $b = head ] && extra=("${head_args[@]}")
    MTGPU_CACHE_DIR="$d/kcache" POCL_CACHE_DIR="$d/pocl" "$work/$b-build/mtgpu" tune "$WORKLOAD" --trials "$TRIALS" \
      --cost-model random --seed "$round" --early-stop 0 --time-limit 0 --db "$d/t.db" --json "${extra[@]}" >"$d/out.jsonl"
    python3 - "$d/out.jsonl" "$d/t.db" "$b" "$rev" "$round" >>"$csv" <<'PY'
import json, sqlite3, sys
out, db, b, rev, rnd = sys.argv[1:]
summary = [json.loads(l) for l in open(out) if '"type": "summary"' in l][-1]
con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
build_s = con.execute("select coalesce(sum(build_s), 0) from records").fetchone()[0]
configs = con.execute("select group_concat(template || ':' || config, ';') from (select template, config from records order by template, config)").fetchone()[0]
t = summary["tasks"][0]
import hashlib
print(f"{b},{rev},{rnd},{summary['wall_s']:.2f},{t['trials']},{build_s:.2f},{t['gflops']},{hashlib.sha1(configs.encode()).hexdigest()[:12]}")
PY
    tail -1 "$csv"
  done
done

python3 - "$csv" "$OUT/tune_speed.md" "$WORKLOAD" "$TRIALS" "$ROUNDS" <<'PY'
import csv, statistics, sys, time
path, md, wl, trials, rounds = sys.argv[1:]
rows = list(csv.DictReader(open(path)))
by = {}
for r in rows:
    by.setdefault(r["build"], []).append(r)
def med(b, k):
    return statistics.median(float(r[k]) for r in by[b])
lines = [
    "# Tuning throughput: compiler processes and PoCL's cache against the base build",
    "",
    f"Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `bench/tune_speed/run.sh`: "
    f"`mtgpu tune {wl} --trials {trials} --cost-model random --seed ROUND` with cold kernel caches, "
    f"the two builds in turns, {rounds} rounds. Data: `tune_speed.csv`.",
    "",
    "| build | revision | median wall s | median sum of build_s | trials | seconds per trial | speed-up |",
    "|---|---|---|---|---|---|---|",
]
base = med("base", "wall_s")
for b in ("base", "head"):
    w = med(b, "wall_s")
    lines.append(f"| {b} | {by[b][0]['revision']} | {w:.1f} | {med(b, 'build_s_sum'):.1f} | {by[b][0]['trials']} | "
                 f"{w / float(by[b][0]['trials']):.2f} | {base / w:.2f}x |")
same = all(len({r["configs"] for r in rows if r["round"] == k}) == 1 for k in {r["round"] for r in rows})
lines += ["", "Both builds measured the same configs in every round: " + ("yes" if same else "NO (the ratio then also compares different kernels)") + "."]
lines += ["", "build_s is the compile time each record carries (in the base build: the tuner's in-process compile; "
          "in the head build: the compiler process's, first launch included)."]
open(md, "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
