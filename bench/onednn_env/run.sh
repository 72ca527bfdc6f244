#!/usr/bin/env bash
# oneDNN's whole networks (blocked layouts) under a few OpenMP environments,
# in turns: which setting the comparisons with mtgpu should give it. Each
# round runs every network under every setting, the order rotating; ratios
# to the first setting are taken within a round.
# Writes $OUT/$NAME.md and .json.
#
#   bench/onednn_env/run.sh      (four networks, 3 settings, 3 rounds: about 3 minutes)
#
# Environment (defaults in brackets): NETS ["resnet50 mobilenet_v2 resnet18 vgg16"],
# SETTINGS ';'-separated sets of VAR=VALUE words, "-" for OpenMP's defaults
# ["-;OMP_WAIT_POLICY=passive;OMP_PROC_BIND=close OMP_PLACES=cores"], ROUNDS [3],
# REPEAT [10] passes per run, BUILD_DIR [build-bench], OUT [bench/onednn_env/results],
# NAME [onednn_env].
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
NETS="${NETS:-resnet50 mobilenet_v2 resnet18 vgg16}"
SETTINGS="${SETTINGS:--;OMP_WAIT_POLICY=passive;OMP_PROC_BIND=close OMP_PLACES=cores}"
ROUNDS="${ROUNDS:-3}"
REPEAT="${REPEAT:-10}"
OUT="${OUT:-bench/onednn_env/results}"
NAME="${NAME:-onednn_env}"
BUILD="${BUILD_DIR:-build-bench}"
IFS=';' read -r -a settings <<<"$SETTINGS"

# shellcheck source=../common/network_bins.sh
. bench/common/network_bins.sh
raw="$OUT/raw/$NAME"
rm -rf "$raw"
mkdir -p "$raw"
for ((r = 0; r < ROUNDS; r++)); do
  for net in $NETS; do
    for ((i = 0; i < ${#settings[@]}; i++)); do
      k=$(((i + r) % ${#settings[@]}))
      read -r -a envs <<<"${settings[$k]}"
      [ "${envs[0]}" = "-" ] && envs=()
      echo "onednn_env: round $((r + 1))/$ROUNDS $net: ${settings[$k]}" >&2
      # env -u: the setting alone decides, whatever this shell exports.
      env -u OMP_WAIT_POLICY -u OMP_PROC_BIND -u OMP_PLACES ${envs[@]+"${envs[@]}"} \
        "$bin"/bench_onednn_net "$net" --layout any --repeat "$REPEAT" --json >"$raw/$net.$k.$r.json"
    done
  done
done

# shellcheck disable=SC2086 # NETS: one argument per network
python3 - "$raw" "$OUT/$NAME" "$ROUNDS" "$REPEAT" "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
  "$(PYTHONPATH=bench/common python3 -c 'import benchlib; print(benchlib.cpu_model())')" "$(nproc)" "$SETTINGS" $NETS <<'PY'
import datetime, json, statistics as st, sys
raw, out, rounds, repeat, commit, cpu, cores, settings = sys.argv[1:9]
nets, settings, rounds = sys.argv[9:], settings.split(";"), int(rounds)
res = {n: [[json.load(open(f"{raw}/{n}.{k}.{r}.json")) for r in range(rounds)] for k in range(len(settings))] for n in nets}
now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
v = res[nets[0]][0][0]
L = [f"# oneDNN's networks under OpenMP environments", "",
     f"Generated {now} by `bench/onednn_env/run.sh` at commit {commit} on {cpu}, {cores} cores; oneDNN {v.get('version')} ({v.get('isa')}), blocked layouts.", "",
     f"Regenerate: `SETTINGS=\"{';'.join(settings)}\" ROUNDS={rounds} bench/onednn_env/run.sh`", "",
     f"`bench_onednn_net NET --layout any --repeat {repeat}` (median pass), every setting in turns, the order rotating, {rounds} rounds; `-` is OpenMP's defaults "
     "(none of OMP_WAIT_POLICY, OMP_PROC_BIND, OMP_PLACES set). Ratios to the first setting are taken within a round: median (range).", "",
     "| network | " + " | ".join(f"`{s}` ms" for s in settings) + " | " + " | ".join(f"`{s}` / `{settings[0]}`" for s in settings[1:]) + " |",
     "|---" * (1 + 2 * len(settings) - 1) + "|"]
table = {}
for n in nets:
    ms = [[res[n][k][r]["median_ms"] for r in range(rounds)] for k in range(len(settings))]
    ratios = [[a / b for a, b in zip(ms[k], ms[0])] for k in range(len(settings))]
    table[n] = {"ms": ms, "ratio_to_first": ratios}
    cells = [f"{st.median(m):.2f}" for m in ms] + [f"{st.median(x):.2f} ({min(x):.2f}-{max(x):.2f})" for x in ratios[1:]]
    L.append(f"| {n} | " + " | ".join(cells) + " |")
open(out + ".md", "w").write("\n".join(L) + "\n")
json.dump({"generated": now, "commit": commit, "cpu": cpu, "cores": int(cores), "settings": settings, "rounds": rounds, "repeat": int(repeat), "networks": table},
          open(out + ".json", "w"), indent=1)
print("\n".join(L))
PY
