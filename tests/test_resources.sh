#!/usr/bin/env bash
# Every reader of outside files given what never ends or is far too large:
# /dev/zero, a FIFO no one writes, and a sparse file of 30 GB. Each command
# must refuse (exit 1, with a message that is not "out of memory") within 10
# seconds, under a limit of
# 8 GiB of address space where the build allows one (a sanitized build maps
# terabytes of shadow memory: there the time limit alone holds).
#   tests/test_resources.sh PATH/TO/mtgpu
set -u
mtgpu="$1"
tmp=$(mktemp -d /tmp/mtgpu-test-resources-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
unset MTGPU_DB
pass=0 fail=0
mkfifo "$tmp/fifo"
: >"$tmp/sparse"
truncate -s 30G "$tmp/sparse"
limit=""
if ! ldd "$mtgpu" 2>/dev/null | grep -q 'libasan\|libtsan\|libmsan'; then limit="ulimit -v 8388608;"; fi
wl="n=1,c=64,h=56,w=56,k=64,r=3,s=3,pad=1"

# refuses WHAT ARGS... (FILE in ARGS stands for the input): exit 1 within 10 s, for each input.
refuses() {
  local what="$1"
  shift
  for input in /dev/zero "$tmp/fifo" "$tmp/sparse"; do
    local args=()
    for a in "$@"; do args+=("${a//FILE/$input}"); done
    local t0 rc
    t0=$(date +%s)
    bash -c "$limit exec timeout 10 \"\$0\" \"\$@\"" "$mtgpu" "${args[@]}" >"$tmp/out" 2>"$tmp/err" </dev/null
    rc=$?
    # Refused, not run out of memory against the limit.
    if [ "$rc" -eq 1 ] && [ -s "$tmp/err" ] && ! grep -qi 'out of memory' "$tmp/err"; then
      pass=$((pass + 1))
    else
      fail=$((fail + 1))
      echo "FAIL: $what of ${input##*/}: exit $rc after $(($(date +%s) - t0)) s"
      sed 's/^/    /' "$tmp/err" | head -3
    fi
  done
}

refuses "import-autotvm" import-autotvm FILE --db "$tmp/i.db"
refuses "best --db" best "$wl" --db FILE
refuses "export-autotvm --db" export-autotvm --db FILE
refuses "merge-db SOURCE" merge-db FILE --db "$tmp/m.db"
refuses "merge-db --db" merge-db "$tmp/m.db" --db FILE
refuses "train --db" train --db FILE --out "$tmp/m.gnn"
refuses "tune --simulate" tune "$wl" --simulate FILE --no-db
data="$(cd "$(dirname "$0")/.." && pwd)/data/opencl_dataset.db"
refuses "tune --model" tune "$wl" --simulate "$data" --no-db --cost-model gnn-transfer --model FILE --trials 1
refuses "eval-model --model" eval-model --db "$data" --model FILE
refuses "tune --db" tune "$wl" --simulate "$(cd "$(dirname "$0")/.." && pwd)/data/opencl_dataset.db" --db FILE --trials 1
if "$mtgpu" devices >/dev/null 2>&1; then
  refuses "run --weights" run squeezenet1_1 --weights FILE --repeat 1
else
  echo "skipped run --weights: no device"
fi
echo "resources: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
