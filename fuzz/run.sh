#!/bin/sh
# Builds the libFuzzer harnesses with clang and runs each for a while.
#
#   fuzz/run.sh [SECONDS] [BUILD_DIR]
#
# SECONDS    how long to fuzz each harness (default 5).
# BUILD_DIR  where to configure the clang build (default: build-fuzz at the
#            repository root; any path works, e.g. /tmp/mtgpu-fuzz).
# CC         the clang to use (default: clang).
# HARNESSES  the harnesses to run (default: all of them).
#
# The seed corpus (fuzz/corpus/<harness>) is copied to a temporary directory
# first, so the fuzzer never writes into the repository. Exits non-zero if a
# harness fails (crash, sanitizer report, leak, timeout); its log and the
# crashing input are kept and their paths printed.
set -eu

SECONDS_PER=${1:-5}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BUILD=${2:-$ROOT/build-fuzz}
CC=${CC:-clang}
JOBS=${JOBS:-2}

case "$SECONDS_PER" in
  ''|*[!0-9]*) echo "usage: $0 [SECONDS] [BUILD_DIR]" >&2; exit 2 ;;
esac

cmake -S "$ROOT" -B "$BUILD" -DCMAKE_C_COMPILER="$CC" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DMTGPU_FUZZ=ON -DMTGPU_TESTS=OFF -DMTGPU_OPENCL=OFF -DMTGPU_CUDA=OFF >"$BUILD.configure.log" 2>&1 || {
  cat "$BUILD.configure.log" >&2; echo "fuzz: configure failed" >&2; exit 1; }
rm -f "$BUILD.configure.log"

HARNESSES=${HARNESSES:-"fuzz_workload fuzz_config fuzz_autotvm fuzz_records fuzz_gnn_model fuzz_weights"}
# Only the harness targets: they compile the library sources they need
# themselves, so an unrelated part of libmtgpu cannot break the fuzz build.
cmake --build "$BUILD" -j "$JOBS" --target $HARNESSES

failed=0
for h in $HARNESSES; do
  name=${h#fuzz_}
  work=$(mktemp -d "${TMPDIR:-/tmp}/mtgpu-$h.XXXXXX")
  mkdir -p "$work/corpus"
  if [ -d "$HERE/corpus/$name" ]; then cp "$HERE/corpus/$name"/* "$work/corpus/" 2>/dev/null || true; fi
  dict=""
  if [ -f "$HERE/$name.dict" ]; then dict="-dict=$HERE/$name.dict"; fi
  echo "== $h: ${SECONDS_PER}s, corpus $(ls "$work/corpus" | wc -l) seeds"
  # Run inside the temp dir so that nothing (crash files, -fork logs) lands in the repo.
  set +e
  (cd "$work" && "$BUILD/fuzz/$h" -max_total_time="$SECONDS_PER" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix="$work/" -print_final_stats=1 $dict corpus) >"$work/log" 2>&1
  rc=$?
  set -e
  grep -E '^(stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb)|^#[0-9]+.*DONE' "$work/log" || true
  echo "   corpus grew to $(ls "$work/corpus" | wc -l) inputs"
  if [ $rc -ne 0 ]; then
    failed=1
    echo "!! $h FAILED (exit $rc); log: $work/log" >&2
    tail -n 40 "$work/log" >&2
    for a in "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-*; do
      [ -e "$a" ] && echo "!! reproducer: $a   (rerun: $BUILD/fuzz/$h $a)" >&2
    done
  else
    rm -rf "$work"
  fi
done
exit $failed
