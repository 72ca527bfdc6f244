#!/usr/bin/env bash
# Kernel speed of two builds side by side: the same configs of one template,
# built by the working tree's generator and by a base revision's (BASE), timed
# in turns with `mtgpu conv` on the layers of ResNet-50 that the change is
# about. A change to a template's code generator (not to its space) keeps the
# configs, so the ratio is the generated code alone. Each config is timed
# ROUNDS times per build, the builds alternating (the machine is shared: turns
# spread its noise over both); the cell is the median.
#
#   bench/kernel_ab/run.sh            (about 5 minutes on the 2-core machine)
#
# Environment (defaults in brackets):
#   BASE       git revision to compare with [41c425e: kvec with conditional input loads]
#   TEMPLATE   [kvec]
#   LAYERS     space-separated workloads [ResNet-50's four 3x3 stride-1 layers
#              and its 1x1 64->256 at 56x56]
#   RANDOM_CONFIGS  random configs per layer besides the CPU default config [4]
#   ROUNDS     [3]
#   OUT        [bench/kernel_ab/results] gets NAME.csv and NAME.md
#   NAME       [kernel_ab]
set -euo pipefail
cd "$(dirname "$0")/../.."
BASE="${BASE:-41c425e}"
TEMPLATE="${TEMPLATE:-kvec}"
LAYERS="${LAYERS:-n=1,c=64,h=56,w=56,k=64,r=3,s=3,pad=1 n=1,c=128,h=28,w=28,k=128,r=3,s=3,pad=1 n=1,c=256,h=14,w=14,k=256,r=3,s=3,pad=1 n=1,c=512,h=7,w=7,k=512,r=3,s=3,pad=1 n=1,c=64,h=56,w=56,k=256,r=1,s=1}"
RANDOM_N="${RANDOM_CONFIGS:-4}"
ROUNDS="${ROUNDS:-3}"
OUT="${OUT:-bench/kernel_ab/results}"
NAME="${NAME:-kernel_ab}"
. bench/common/two_builds.sh
bench_base_and_head mtgpu-kernel-ab "$BASE"

# The configs: the template's CPU default (as the working tree's default_config
# rule picks it) and RANDOM seeded random ones, the same text for both builds.
cfgs="$work/configs.tsv"
: >"$cfgs"
for wl in $LAYERS; do
  "$work/head-build/mtgpu" conv "$wl" --template "$TEMPLATE" --random "$RANDOM_N" --seed 1 --source 2>/dev/null |
    sed -n "s|^// $TEMPLATE \(.*\)|$wl\trandom\t\1|p" >>"$cfgs"
  # A HOME without a tuning database: `mtgpu best` then gives the default.
  mkdir -p "$work/home"
  env -u MTGPU_DB HOME="$work/home" python3 - "$work/head-build/mtgpu" "$wl" "$TEMPLATE" >>"$cfgs" <<'PY'
import json, subprocess, sys
exe, wl, tmpl = sys.argv[1:]
out = subprocess.run([exe, "best", wl, "--json"], capture_output=True, text=True).stdout
for line in out.splitlines():
    if line.startswith("{") and '"template"' in line:
        d = json.loads(line)
        if d.get("template") == tmpl:
            print(f"{wl}\tdefault\t{d['config']}")
PY
done
[ -s "$cfgs" ] || { echo "kernel_ab: no configs of template $TEMPLATE for these layers" >&2; exit 1; }

csv="$OUT/$NAME.csv"
mkdir -p "$OUT"
echo "layer,kind,config,build,revision,round,ms,gflops,status" >"$csv"
for round in $(seq 1 "$ROUNDS"); do
  while IFS=$'\t' read -r wl kind cfg; do
    for b in base head; do
      rev=$([ $b = base ] && echo "$base_rev" || echo "$head_rev")
      line=$("$work/$b-build/mtgpu" conv "$wl" --template "$TEMPLATE" --config "$cfg" --json 2>/dev/null | grep '^{' | tail -1 || true)
      python3 - "$line" "$wl" "$kind" "$cfg" "$b" "$rev" "$round" >>"$csv" <<'PY'
import json, sys
line, wl, kind, cfg, b, rev, rnd = sys.argv[1:]
try:
    d = json.loads(line)
    ms, gf, st = d.get("ms"), d.get("gflops"), d.get("status", "?")
except ValueError:
    ms, gf, st = None, None, "no_output"
f = lambda v: "" if v is None else f"{v:.4f}"
print(f'"{wl}",{kind},"{cfg}",{b},{rev},{rnd},{f(ms)},{f(gf)},{st}')
PY
    done
  done <"$cfgs"
  echo "kernel_ab: round $round of $ROUNDS done" >&2
done

python3 - "$csv" "$OUT/$NAME.md" "$TEMPLATE" "$ROUNDS" <<'PY'
import csv, statistics, sys, time
path, md, tmpl, rounds = sys.argv[1:]
rows = list(csv.DictReader(open(path)))
revs = {r["build"]: r["revision"] for r in rows}
cells = {}
for r in rows:
    key = (r["layer"], r["kind"], r["config"])
    cells.setdefault(key, {}).setdefault(r["build"], []).append(r)
def med(rs):
    v = [float(r["ms"]) for r in rs if r["status"] == "ok" and r["ms"]]
    return statistics.median(v) if v else None
out = []
out.append(f"# `{tmpl}` kernels of two generator revisions, side by side\n")
out.append(f"Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `bench/kernel_ab/run.sh` "
           f"(base {revs.get('base')}, head {revs.get('head')}): the same configs built by each revision's generator, "
           f"timed with `mtgpu conv --config` in turns, {rounds} rounds; cells are medians of the rounds (ms). "
           "Ratio: base / head (above 1: head faster). `default` is the template's CPU default config.\n")
out.append("| layer | config | base ms | head ms | ratio |")
out.append("|---|---|---|---|---|")
ratios = {}
for (wl, kind, cfg), by in cells.items():
    b, h = med(by.get("base", [])), med(by.get("head", []))
    ratio = b / h if b and h else None
    if ratio: ratios.setdefault(wl, []).append(ratio)
    fmt = lambda v: "failed" if v is None else f"{v:.4f}"
    out.append(f"| `{wl}` | {kind} `{cfg}` | {fmt(b)} | {fmt(h)} | {'-' if ratio is None else f'{ratio:.2f}'} |")
out.append("")
out.append("| layer | configs | geometric mean ratio |")
out.append("|---|---|---|")
import math
for wl, rs in ratios.items():
    out.append(f"| `{wl}` | {len(rs)} | {math.exp(sum(map(math.log, rs)) / len(rs)):.2f} |")
open(md, "w").write("\n".join(out) + "\n")
print("\n".join(out))
PY
