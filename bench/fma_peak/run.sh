#!/usr/bin/env bash
# The CPU's FMA peak two ways in turns (bench_fma_peak): native loops of
# independent AVX2 (and AVX-512) FMA chains on one core and on all of them,
# and mtgpu's probe, whose figure `mtgpu run --profile` and bench/vs_onednn
# take the layers' fractions of peak against; and kvec's 8-lane reduction
# step (1 x 14 and 3 x 4 tiles) with its data in L1 on one core, against
# the chains. Writes $OUT/$NAME.md and .json.
#
#   bench/fma_peak/run.sh        (about 10 seconds per round)
#
# Environment (defaults in brackets): ROUNDS [5], BUILD_DIR [build-bench],
# OUT [bench/fma_peak/results], NAME [fma_peak].
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
ROUNDS="${ROUNDS:-5}"
OUT="${OUT:-bench/fma_peak/results}"
NAME="${NAME:-fma_peak}"
BUILD="${BUILD_DIR:-build-bench}"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target bench_fma_peak >/dev/null
mkdir -p "$OUT"
"$BUILD"/bench_fma_peak --rounds "$ROUNDS" --json >"$OUT/$NAME.json"
cpu=$(PYTHONPATH=bench/common python3 -c "import benchlib; print(benchlib.cpu_model())")
python3 - "$OUT/$NAME.json" "$OUT/$NAME.md" "$cpu" "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" "$ROUNDS" "$NAME" <<'PY'
import json, statistics, sys, datetime
src, dst, cpu, commit, rounds, name = sys.argv[1:]
d = json.load(open(src))
md = [f"# FMA peak: native loops against mtgpu's probe\n",
      f"Generated {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC by `bench/fma_peak/run.sh` at commit {commit} on {cpu} "
      f"({d['threads']} threads; device {d['device']}). Each round: {d['native_chains']} independent FMA chains per thread "
      "(native, registers only) on one thread and on all at once, per vector width the CPU has, then "
      "`mt_device_measure_peak` (the figure `mtgpu run --profile` takes fractions of peak against), then kvec's reduction "
      "step on one thread without its memory traffic (weight vectors loaded and input values broadcast from L1, "
      "accumulators in registers: bench/fma_peak/fma_peak.c). Medians over the rounds, ranges in brackets.\n",
      "| what | GFLOP/s | probe / native, in the same round |", "|---|---|---|"]
probe = d["probe_gflops"]
med = lambda v: statistics.median(v)
rng = lambda v: f"{min(v):.1f}-{max(v):.1f}"
md.append(f"| mtgpu's probe | {med(probe):.1f} ({rng(probe)}) | |")
for n in d["native"]:
    for key, what in (("one_thread_gflops", "1 thread"), ("all_threads_gflops", f"{d['threads']} threads")):
        v = n[key]
        ratio = [p / x for p, x in zip(probe, v) if x > 0]
        cell = f"{med(ratio):.2f} ({min(ratio):.2f}-{max(ratio):.2f})" if key == "all_threads_gflops" and ratio else ""
        md.append(f"| native, {n['lanes']} lanes, {what} | {med(v):.1f} ({rng(v)}) | {cell} |")
one8 = next((n["one_thread_gflops"] for n in d["native"] if n["lanes"] == 8), None)
for t in d.get("kvec_steps", []):
    v = t["one_thread_gflops"]
    ratio = [x / c for x, c in zip(v, one8) if c > 0] if one8 else []
    cell = f"{med(ratio):.2f} ({min(ratio):.2f}-{max(ratio):.2f}) of the 8-lane chains on 1 thread" if ratio else ""
    md.append(f"| kvec's {t['tile']} step (8 lanes, {t['fmas']} FMAs per input channel), 1 thread | {med(v):.1f} ({rng(v)}) | {cell} |")
md.append(f"\nRegenerate: `ROUNDS={rounds} NAME={name} bench/fma_peak/run.sh`.\n")
open(dst, "w").write("\n".join(md) + "\n")
print("\n".join(md))
PY
