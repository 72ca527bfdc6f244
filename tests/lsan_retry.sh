#!/usr/bin/env bash
# Runs a test program, and once more where LeakSanitizer's own tracer crashed
# in the leak check at exit ("Tracer caught signal 11" then "LeakSanitizer
# has encountered a fatal error"): under load it can, while PoCL's worker
# threads wind down, after the test's checks have all passed. That is no
# finding of the test (nor a leak report), so it is not its verdict; a second
# crash, or any other failure, stands.
#
#   tests/lsan_retry.sh PROGRAM [ARGS...]
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: $0 PROGRAM [ARGS...]" >&2; exit 2; }
out=$(mktemp) || exit 1
trap 'rm -f "$out"' EXIT
"$@" 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ] && grep -q "Tracer caught signal" "$out" && grep -q "LeakSanitizer has encountered a fatal error" "$out"; then
  echo "lsan_retry: LeakSanitizer's tracer crashed in the leak check at exit (exit status $rc); running $(basename "$1") once more" >&2
  "$@"
  rc=$?
fi
exit "$rc"
