#!/usr/bin/env bash
# What a kernel launch costs apart from its work (bench_launch_overhead:
# chains of launches queued as a pass queues them: a near-empty kernel on 1
# to 2048 work-groups, and one whose work-groups each run a fixed chain of
# multiply-adds on 1 to 4 per core), under each environment setting in turns,
# ROUNDS rounds. Per setting: fixed device time per launch + per work-group,
# and how far apart the cores start a launch. Writes $OUT/$NAME.md and .json.
#
#   bench/launch_overhead/run.sh       (under a minute)
#
# Environment (defaults in brackets): SETTINGS ';'-separated sets of VAR=VALUE
# words, "-" for none ["-;POCL_AFFINITY=0"], ROUNDS [3], CHAIN [50] launches per
# chain, BUILD_DIR [build-bench], OUT [bench/launch_overhead/results], NAME [launch_overhead].
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
SETTINGS="${SETTINGS:--;POCL_AFFINITY=0}"
ROUNDS="${ROUNDS:-3}"
CHAIN="${CHAIN:-50}"
OUT="${OUT:-bench/launch_overhead/results}"
NAME="${NAME:-launch_overhead}"
BUILD="${BUILD_DIR:-build-bench}"
IFS=';' read -r -a settings <<<"$SETTINGS"
bench/common/setup.sh >/dev/null
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target bench_launch_overhead >/dev/null
raw="$OUT/raw/$NAME"
rm -rf "$raw"
mkdir -p "$raw"
for ((r = 0; r < ROUNDS; r++)); do
  for ((i = 0; i < ${#settings[@]}; i++)); do
    k=$(((i + r) % ${#settings[@]}))
    read -r -a envs <<<"${settings[$k]}"
    [ "${envs[0]}" = "-" ] && envs=()
    env -u POCL_AFFINITY ${envs[@]+"${envs[@]}"} "$BUILD"/bench_launch_overhead --chain "$CHAIN" --rounds 3 --json >"$raw/$k.$r.jsonl"
  done
done
python3 - "$raw" "$OUT/$NAME" "$ROUNDS" "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
  "$(PYTHONPATH=bench/common python3 -c 'import benchlib; print(benchlib.cpu_model())')" "$(nproc)" "$SETTINGS" "$CHAIN" <<'PY'
import datetime, json, statistics as st, sys
raw, out, rounds, commit, cpu, cores, settings, chain = sys.argv[1:9]
settings, rounds = settings.split(";"), int(rounds)
runs = [[[json.loads(l) for l in open(f"{raw}/{k}.{r}.jsonl") if l.startswith("{")] for r in range(rounds)] for k in range(len(settings))]
cases = [(x["kernel"], x["groups"]) for x in runs[0][0]]
now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
res = {"generated": now, "commit": commit, "cpu": cpu, "cores": int(cores), "chain": int(chain), "rounds": rounds, "cases": cases, "settings": {}}
for k, s in enumerate(settings):
    dev = [st.median(runs[k][r][c]["device_us"] for r in range(rounds)) for c in range(len(cases))]
    wall = [st.median(runs[k][r][c]["wall_us"] for r in range(rounds)) for c in range(len(cases))]
    touch = [(g, d) for (kern, g), d in zip(cases, dev) if kern == "touch"]
    mx, my = st.mean(g for g, _ in touch), st.mean(d for _, d in touch)
    slope = sum((g - mx) * (d - my) for g, d in touch) / sum((g - mx) ** 2 for g, _ in touch)
    spin = {g: d for (kern, g), d in zip(cases, dev) if kern == "spin"}
    res["settings"][s] = {"device_us": dev, "wall_us": wall, "fixed_us": my - slope * mx, "per_group_us": slope, "spin_us": spin}
L = ["# What a kernel launch costs apart from its work", "",
     f"Generated {now} by `bench/launch_overhead/run.sh` at commit {commit} on {cpu}, {cores} cores; PoCL's CPU device.", "",
     f"Regenerate: `SETTINGS=\"{';'.join(settings)}\" ROUNDS={rounds} bench/launch_overhead/run.sh`", "",
     f"`bench_launch_overhead`: chains of {chain} launches queued back to back, as a network's pass queues its kernels (3 chains per process), "
     "of `touch` (one add per work-group) and of `spin` (each work-group a chain of 20000 dependent multiply-adds), one work-item per work-group; "
     "per case the median device time of a launch (profiling events: what `mtgpu run --profile` charges a layer) and the chain's wall time per launch. "
     f"Settings in turns, {rounds} rounds, medians over them; `-` is the environment as mtgpu sets it (PoCL's workers pinned).", "",
     "| kernel | work-groups | " + " | ".join(f"`{s}` device us | `{s}` wall us" for s in settings) + " |", "|---" * (2 + 2 * len(settings)) + "|"]
for c, (kern, g) in enumerate(cases):
    L.append(f"| {kern} | {g} | " + " | ".join(f"{res['settings'][s]['device_us'][c]:.1f} | {res['settings'][s]['wall_us'][c]:.1f}" for s in settings) + " |")
L.append("")
for s, v in res["settings"].items():
    sp = v["spin_us"]
    one, groups = sp.get(1), sorted(sp)
    line = f"`{s}`: `touch` fitted as {v['fixed_us']:.1f} us + {v['per_group_us'] * 1000:.1f} ns per work-group of device time."
    if one and len(groups) > 1:
        two = sp[groups[1]]
        line += (f" `spin` on {groups[1]} work-groups {two:.1f} us against {one:.1f} on one: the cores started the launch "
                 f"{two - one:.1f} us apart ({'all of it on one core' if two > 1.9 * one else 'one of them late'}).")
    L.append(line)
open(out + ".md", "w").write("\n".join(L) + "\n")
json.dump(res, open(out + ".json", "w"), indent=1)
print("\n".join(L))
PY
