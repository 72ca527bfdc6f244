#!/usr/bin/env bash
# Where mtgpu's time goes against oneDNN's, layer by layer, inside the
# network: `mtgpu run NET --profile` (a fused pass timed from inside by its
# threads' clock readings; unfused builds: each kernel timed on the device
# inside a pass queued as without profiling) and `bench_onednn_net NET --profile`
# (oneDNN's blocked layouts, each primitive timed alone inside passes, its
# reorders counted for the layer that needs them), in turns, ROUNDS rounds,
# the order alternating. Per layer, per class of convolution (mtgpu's
# template, kernel size, stride, output size) and for all convolutions: the
# ratio mtgpu / oneDNN taken within each round, then its median and range
# over the rounds, with GFLOP/s and the fraction of the FMA peak that
# `mtgpu run --profile` measured in the same round.
#
#   bench/layers_vs_onednn/run.sh [DB]      (a few minutes per network)
#
# DB: a tuning database (e.g. one of bench/vs_onednn's); without one every
# convolution runs its default config. Environment (defaults in brackets):
#   NETWORK    [resnet50]
#   ROUNDS     [3]
#   REPEAT     passes per profile [15]
#   BUILD_DIR  [build-bench]
#   OUT        [bench/layers_vs_onednn/results], gets NAME.md and NAME.json
#   NAME       [NETWORK_default, or NETWORK_tuned with a DB]
#   ONEDNN_ENV environment of bench_onednn_net [none: OpenMP's defaults,
#              as oneDNN runs for its users; OMP_WAIT_POLICY=passive, the default before
#              2026-12-05, made its networks 1.10-2.28x slower: bench/onednn_env]
set -euo pipefail
cd "$(dirname "$0")/../.."
DB="${1:-}"
NETWORK="${NETWORK:-resnet50}"
ROUNDS="${ROUNDS:-3}"
REPEAT="${REPEAT:-15}"
BUILD="${BUILD_DIR:-build-bench}"
OUT="${OUT:-bench/layers_vs_onednn/results}"
NAME="${NAME:-${NETWORK}_$([ -n "$DB" ] && echo tuned || echo default)}"
read -r -a onednn_env <<<"${ONEDNN_ENV-}"
if [ -n "$DB" ] && [ ! -s "$DB" ]; then
  echo "layers_vs_onednn: no tuning database at $DB" >&2
  exit 2
fi

bench/common/setup.sh >/dev/null
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target mtgpu_cli mtgpu-worker bench_onednn_net >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$BUILD"/mtgpu "$BUILD"/bench_onednn_net "$work"/
export MTGPU_MODEL_DIR="$PWD/data"

for ((r = 0; r < ROUNDS; r++)); do
  order="mtgpu onednn"
  [ $((r % 2)) -eq 1 ] && order="onednn mtgpu"
  for side in $order; do
    echo "layers_vs_onednn: $NETWORK round $((r + 1))/$ROUNDS: $side" >&2
    if [ "$side" = onednn ]; then
      env "${onednn_env[@]}" "$work"/bench_onednn_net "$NETWORK" --profile --repeat "$REPEAT" --json >"$work/onednn.$r.json"
    elif [ -n "$DB" ]; then
      "$work"/mtgpu run "$NETWORK" --db "$DB" --profile --repeat "$REPEAT" --json >"$work/mtgpu.$r.json"
    else
      MTGPU_DB="$work/none.db" "$work"/mtgpu run "$NETWORK" --profile --repeat "$REPEAT" --json >"$work/mtgpu.$r.json"
    fi
  done
done

cpu=$(PYTHONPATH=bench/common python3 -c "import benchlib; print(benchlib.cpu_model())")
python3 bench/layers_vs_onednn/report.py --work "$work" --rounds "$ROUNDS" --repeat "$REPEAT" --network "$NETWORK" \
  --db "${DB:-none (default configs)}" --cpu "$cpu" --cores "$(nproc)" \
  --commit "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" --out "$OUT" --name "$NAME"
