#!/usr/bin/env bash
# mtgpu tune across the ranks of an MPI job (built with MTGPU_MPI), on this
# machine: mpirun --oversubscribe -n 3, rank 0 searching and writing the
# database, ranks 1 and 2 measuring. The same checks as on one device:
# every trial measured once and recorded with the ranks' fingerprint, the
# same configs as a one-process run of the same seed, ranked alike by time. Then rank 1 is killed
# with SIGKILL mid-run: the job ends with an error that names the rank and
# what was in flight, the database is intact and keeps every record it had,
# and a rerun completes the trials.
#   tests/test_mpi.sh PATH/TO/mtgpu
# Exit 77 (skip) without mpirun or the sqlite3 command.
set -u
. "$(dirname "$0")/rank_agreement.sh"
mtgpu="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
command -v mpirun >/dev/null 2>&1 || { echo "skipped: no mpirun (install openmpi-bin)"; exit 77; }
command -v sqlite3 >/dev/null 2>&1 || { echo "skipped: no sqlite3 command to read the records"; exit 77; }
tmp=$(mktemp -d /tmp/mtgpu-test-mpi-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# Open MPI refuses root without these (containers, CI).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Each rank's environment: the sanitizers' and the kernel cache's settings.
# LeakSanitizer is off in the ranks: Open MPI unloads its components at
# MPI_Finalize, and what they keep then has no module LSan could suppress
# by name. The measurer and tuner paths the ranks run are leak-checked by
# test_measurer, test_tune and test_multi_device.
[ -n "${ASAN_OPTIONS:-}" ] && export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"
fwd=()
for v in ASAN_OPTIONS LSAN_OPTIONS MTGPU_CACHE_DIR POCL_DEVICES; do [ -n "${!v:-}" ] && fwd+=(-x "$v"); done
mpi() { timeout 600 mpirun --oversubscribe "${fwd[@]}" "$@"; }
fail=0
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
# A query waits up to 5 s for a lock: rank 0 may still be closing the
# database (a WAL checkpoint) when mpirun has returned, and a query that
# failed busy read as an empty answer ("damaged").
q() { sqlite3 -cmd ".timeout 5000" "$1" "$2" 2>/dev/null; }

wl="n=1,c=16,h=14,w=14,k=16,r=3,s=3,pad=1"
args=(tune "$wl" --templates gemm --cost-model random --early-stop 0 --seed 5)

# ---- three ranks against one process ----
trials=10
"$mtgpu" "${args[@]}" --trials $trials --db "$tmp/one.db" >"$tmp/one.out" 2>&1 || bad "one process: exit $?"
mpi -n 3 "$mtgpu" "${args[@]}" --trials $trials --db "$tmp/mpi.db" >"$tmp/mpi.out" 2>&1 || bad "mpirun -n 3: exit $? ($(tail -3 "$tmp/mpi.out"))"
[ "$(q "$tmp/mpi.db" "SELECT count(*) FROM records")" = $trials ] || bad "mpirun -n 3: $(q "$tmp/mpi.db" "SELECT count(*) FROM records") records, not $trials"
[ "$(q "$tmp/mpi.db" "SELECT count(DISTINCT config) FROM records")" = $trials ] || bad "mpirun -n 3: a config was measured twice"
[ "$(q "$tmp/mpi.db" "SELECT count(*) FROM records WHERE status = 'ok' AND median_ms > 0")" = $trials ] || bad "mpirun -n 3: incomplete records"
[ "$(q "$tmp/mpi.db" "SELECT DISTINCT device FROM records")" = "$(q "$tmp/one.db" "SELECT DISTINCT device FROM records")" ] ||
  bad "mpirun -n 3: the records' fingerprint is not the device's"
cmp -s <(q "$tmp/one.db" "SELECT config FROM records ORDER BY config") <(q "$tmp/mpi.db" "SELECT config FROM records ORDER BY config") ||
  bad "mpirun -n 3 measured other configs than one process of the same seed"
# Each record's time belongs to its config: the two runs rank the configs
# alike (tests/rank_agreement.sh).
rho=$(rank_agreement "$tmp/one.db" "$tmp/mpi.db")
rank_agreement_at_least "$rho" 0.6 ||
  bad "mpirun -n 3 ranked the configs unlike one process (Spearman's rho $rho): $(q "$tmp/mpi.db" "SELECT median_ms FROM records ORDER BY config" | tr '\n' ' ')"
echo "the two runs rank the $trials configs with Spearman's rho $rho"

# ---- rank 1 killed mid-run ----
# Rank 0 can name only what rank 1 had in flight: a kill that lands between
# two of rank 1's measurements (rank 0 drawing the next batch) ends the job
# before rank 0 has anything to say. So the kill is tried up to 4 times,
# each on a fresh database, until one lands mid-measurement; every attempt
# must leave the database intact and name rank 1 in mpirun's error.
trials=40
named=0
for attempt in 1 2 3 4; do
  db="$tmp/kill$attempt.db"
  mpi -n 3 "$mtgpu" "${args[@]}" --trials $trials --db "$db" >"$tmp/kill.out" 2>&1 &
  job=$!
  victim=""
  for _ in $(seq 1 600); do
    n=$(q "$db" "SELECT count(*) FROM records")
    if [ "${n:-0}" -ge 4 ]; then
      for p in $(pgrep -f -- "--db $db"); do
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1" && victim=$p
      done
      [ -n "$victim" ] && break
    fi
    sleep 0.2
  done
  if [ -z "$victim" ]; then
    bad "no rank 1 to kill (records: ${n:-0}; $(tail -3 "$tmp/kill.out"))"
    kill $job 2>/dev/null
    wait $job
    break
  fi
  before=$(q "$db" "SELECT count(*) FROM records")
  kill -KILL "$victim"
  wait $job
  rc=$?
  [ $rc != 0 ] || bad "the job ended with status 0 after rank 1 was killed"
  grep -q "rank 1 .*signal 9" "$tmp/kill.out" || bad "no error names rank 1: $(tail -5 "$tmp/kill.out")"
  [ "$(q "$db" "PRAGMA integrity_check")" = ok ] || bad "the database is damaged after the kill"
  after=$(q "$db" "SELECT count(*) FROM records")
  [ "${after:-0}" -ge "$before" ] && [ "$after" -lt $trials ] || bad "records: $before before the kill, $after after (of $trials)"
  [ "$(q "$db" "SELECT count(*) FROM records WHERE message LIKE '%rank%' OR status != 'ok'")" = 0 ] ||
    bad "a record of the lost rank's config was stored: $(q "$db" "SELECT status, message FROM records WHERE status != 'ok'" | head -2)"
  echo "attempt $attempt: killed rank 1 (pid $victim) with $before records committed; $after after the job ended (exit $rc)"
  if grep -q "in flight.*rank 1: gemm" "$tmp/kill.out"; then
    named=1
    break
  fi
  echo "attempt $attempt: rank 0 said nothing of rank 1's work (the kill came between its measurements): $(grep mtgpu "$tmp/kill.out" | tail -2)"
done
[ $named = 1 ] || bad "in 4 attempts rank 0 never said what rank 1 had in flight"
if [ -n "$victim" ]; then
  mpi -n 3 "$mtgpu" "${args[@]}" --trials $trials --db "$db" >"$tmp/rerun.out" 2>&1 || bad "rerun: exit $? ($(tail -3 "$tmp/rerun.out"))"
  grep -q "$trials measurements ($((trials - after)) this run, $after resumed)" "$tmp/rerun.out" || bad "rerun: $(grep measurements "$tmp/rerun.out")"
  [ "$(q "$db" "SELECT count(DISTINCT config) FROM records")" = $trials ] || bad "after the rerun: not $trials distinct configs"
fi

[ $fail = 0 ] && echo "mpi: all checks passed" && exit 0
exit 1
