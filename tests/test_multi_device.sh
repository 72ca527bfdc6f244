#!/usr/bin/env bash
# mtgpu tune on two devices of one machine: PoCL lists two CPU devices
# (POCL_DEVICES="pthread pthread", one thread each), which share a
# fingerprint. The same random search (one seed, no early stop) on one
# device and on both: every trial is measured once and recorded, with the
# device's fingerprint, the two runs measure the same configs, and they
# rank them alike by time.
# A list that mixes fingerprints (a pthread and a basic device) is refused.
#   tests/test_multi_device.sh PATH/TO/mtgpu
# Exit 77 (skip) without the sqlite3 command or without PoCL's two devices.
set -u
. "$(dirname "$0")/rank_agreement.sh"
mtgpu="$1"
command -v sqlite3 >/dev/null 2>&1 || { echo "skipped: no sqlite3 command to read the records"; exit 77; }
tmp=$(mktemp -d /tmp/mtgpu-test-multi-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export POCL_DEVICES="pthread pthread" POCL_MAX_PTHREAD_COUNT=1
n_opencl=$("$mtgpu" devices --json 2>/dev/null | grep -o '"backend": *"opencl"' | wc -l)
[ "$n_opencl" -ge 2 ] || { echo "skipped: PoCL does not list two devices with POCL_DEVICES='pthread pthread' ($n_opencl found)"; exit 77; }
fail=0
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }

wl="n=1,c=16,h=14,w=14,k=16,r=3,s=3,pad=1"
trials=10
args=(tune "$wl" --trials $trials --templates gemm --cost-model random --early-stop 0 --seed 3)

"$mtgpu" "${args[@]}" --device opencl:0 --db "$tmp/one.db" >"$tmp/one.out" 2>&1 || bad "one device: exit $? ($(tail -2 "$tmp/one.out"))"
"$mtgpu" "${args[@]}" --device all --db "$tmp/two.db" >"$tmp/two.out" 2>&1 || bad "--device all: exit $? ($(tail -2 "$tmp/two.out"))"

q() { sqlite3 "$1" "$2" 2>/dev/null; }
for db in one two; do
  [ "$(q "$tmp/$db.db" "SELECT count(*) FROM records")" = $trials ] || bad "$db: $(q "$tmp/$db.db" "SELECT count(*) FROM records") records, not $trials"
  [ "$(q "$tmp/$db.db" "SELECT count(DISTINCT config) FROM records")" = $trials ] || bad "$db: a config was measured twice"
  [ "$(q "$tmp/$db.db" "SELECT count(*) FROM records WHERE status = 'ok' AND median_ms > 0")" = $trials ] ||
    bad "$db: not every record is a complete measurement: $(q "$tmp/$db.db" "SELECT status, message FROM records WHERE status != 'ok'" | head -3)"
done
fp_one=$(q "$tmp/one.db" "SELECT DISTINCT device FROM records")
fp_two=$(q "$tmp/two.db" "SELECT DISTINCT device FROM records")
[ -n "$fp_one" ] && [ "$fp_one" = "$fp_two" ] || bad "fingerprints differ: one device '$fp_one', two devices '$fp_two'"
# The same seed draws the same configs, whichever device timed them.
q "$tmp/one.db" "SELECT config FROM records ORDER BY config" >"$tmp/one.cfg"
q "$tmp/two.db" "SELECT config FROM records ORDER BY config" >"$tmp/two.cfg"
cmp -s "$tmp/one.cfg" "$tmp/two.cfg" || bad "the two runs measured different configs: $(diff "$tmp/one.cfg" "$tmp/two.cfg" | head -4)"
# The two runs rank the configs alike by time (tests/rank_agreement.sh).
rho=$(rank_agreement "$tmp/one.db" "$tmp/two.db")
rank_agreement_at_least "$rho" 0.6 ||
  bad "the two runs ranked the configs unlike each other (Spearman's rho $rho): $(q "$tmp/two.db" "SELECT median_ms FROM records ORDER BY config" | tr '\n' ' ')"
echo "one device and two rank the $trials configs with Spearman's rho $rho"
# A rerun resumes and measures nothing again.
"$mtgpu" "${args[@]}" --device opencl:0,opencl:1 --db "$tmp/two.db" >"$tmp/re.out" 2>&1 || bad "rerun: exit $?"
grep -q "0 this run, $trials resumed" "$tmp/re.out" || bad "rerun did not resume: $(tail -1 "$tmp/re.out")"

# A mixed list is refused, naming both fingerprints; bad lists are usage errors.
POCL_DEVICES="pthread basic" "$mtgpu" "${args[@]}" --device opencl:0,opencl:1 --no-db >"$tmp/mixed.out" 2>&1
rc=$?
[ $rc = 2 ] || bad "mixed fingerprints: exit $rc, not 2"
grep -q "different fingerprints" "$tmp/mixed.out" && grep -q "per-device-records" "$tmp/mixed.out" || bad "mixed fingerprints: $(cat "$tmp/mixed.out")"
[ "$(grep -c "fingerprint [0-9a-f]\{16\}" "$tmp/mixed.out")" = 2 ] || bad "mixed fingerprints: the two are not both named"
for list in "opencl:0,,opencl:1" "opencl:0,opencl:0" "opencl:0," "opencl:x,opencl:1"; do
  "$mtgpu" "${args[@]}" --device "$list" --no-db >"$tmp/bad.out" 2>&1
  rc=$?
  [ $rc = 2 ] || bad "--device $list: exit $rc, not 2 ($(cat "$tmp/bad.out"))"
done
"$mtgpu" "${args[@]}" --device opencl:0,opencl:9 --no-db >"$tmp/bad.out" 2>&1
rc=$?
[ $rc = 1 ] && grep -q "no device opencl:9" "$tmp/bad.out" || bad "--device opencl:0,opencl:9: exit $rc ($(cat "$tmp/bad.out"))"
"$mtgpu" tune --help | grep -q -- "--per-device-records" && "$mtgpu" tune --help | grep -q "opencl:all" || bad "tune --help does not document device lists"

[ $fail = 0 ] && echo "multi-device: all checks passed" && exit 0
exit 1
