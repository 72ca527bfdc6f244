#!/usr/bin/env bash
# Fault injection, the way SQLite tests itself: each write path of the mtgpu
# command runs once to count the writes, fsyncs and renames it makes under
# its directory, then once for every N with the Nth of them failing
# (tests/fault_shim.c, preloaded: ENOSPC for writes, EIO for fsync and
# rename). After each run the command must have failed cleanly (exit 1) or
# succeeded whole (exit 0), never crashed, and what it stores must be intact:
# a replaced file is the old one or the complete new one, with no temporary
# file left; a database opens, passes SQLite's integrity check, holds what it
# held before plus whole records only, and a rerun without faults completes it.
#   tests/test_faults.sh PATH/TO/mtgpu PATH/TO/libmtgpu_fault_shim.so
# Exit 77 (skip) without the sqlite3 command, which the database checks use.
set -u
mtgpu="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
shim="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
src="$(cd "$(dirname "$0")/.." && pwd)"
data="$src/data/opencl_dataset.db"
tophub="$src/tests/data/tophub/cuda_v0.10.log"
rfp=499a4764cf4600f3 # the device data/opencl_dataset.db was recorded on
rwl="n=1,c=64,h=56,w=56,k=64,r=3,s=3,pad=1"
command -v sqlite3 >/dev/null 2>&1 || { echo "skipped: no sqlite3 command for the integrity checks"; exit 77; }
tmp=$(mktemp -d /tmp/mtgpu-test-faults-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
work="$tmp/work"
unset MTGPU_DB
# The shim is preloaded ahead of the sanitizers' runtime in a sanitized build.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
pass=0 fail=0 runs=0

# faulty N ARGS...: runs mtgpu in $work with the Nth counted call failing (0: none); sets rc, and calls to how many were counted.
faulty() {
  local n="$1"
  shift
  (cd "$work" && MTGPU_FAULT_PATH="$work" MTGPU_FAULT_AT="$n" MTGPU_FAULT_REPORT="$tmp/count" LD_PRELOAD="$shim" \
    "$mtgpu" "$@" >"$tmp/out" 2>"$tmp/err")
  rc=$?
  calls=$(cat "$tmp/count" 2>/dev/null || echo 0)
  runs=$((runs + 1))
}

# bad WHAT: one failed check, with the command's stderr.
bad() {
  fail=$((fail + 1))
  echo "FAIL: $1"
  sed 's/^/    /' "$tmp/err" | head -5
}

# db_ok DB: "missing", "empty", or the number of records of an intact mtgpu database; "broken" otherwise.
db_ok() {
  if [ ! -e "$1" ]; then echo missing; return; fi
  local objects
  objects=$(sqlite3 "$1" "SELECT count(*) FROM sqlite_master" 2>/dev/null) || { echo broken; return; }
  if [ "$objects" = 0 ]; then echo empty; return; fi
  [ "$(sqlite3 "$1" "PRAGMA integrity_check" 2>/dev/null)" = ok ] || { echo broken; return; }
  sqlite3 "$1" "SELECT count(*) FROM records" 2>/dev/null || echo broken
}

no_leftovers() {
  if find "$work" -name '*.tmp.*' | grep -q .; then bad "$1: temporary files left: $(find "$work" -name '*.tmp.*')"; return 1; fi
  return 0
}

# ---- inputs: two small logs, three records each ----
sed -n '1,3p' "$tophub" >"$tmp/a.log"
sed -n '4,6p' "$tophub" >"$tmp/b.log"
"$mtgpu" import-autotvm "$tmp/b.log" --db "$tmp/b.db" >/dev/null || { echo "cannot make the source database"; exit 1; }
nb=$(db_ok "$tmp/b.db")

# ---- 1. export-autotvm --out: the old file or the whole new one ----
"$mtgpu" export-autotvm --db "$data" --device "$rfp" --workload "$rwl" --out "$tmp/export.ref" 2>/dev/null || { echo "reference export failed"; exit 1; }
fresh_export() { rm -rf "$work" && mkdir "$work" && echo "old export" >"$work/x.log"; }
fresh_export
faulty 0 export-autotvm --db "$data" --device "$rfp" --workload "$rwl" --out x.log
total=$calls
[ "$total" -gt 0 ] || bad "export: no write was seen under $work (is the shim preloaded?)"
for n in $(seq 1 "$total"); do
  fresh_export
  faulty "$n" export-autotvm --db "$data" --device "$rfp" --workload "$rwl" --out x.log
  if [ "$rc" -eq 1 ] && [ "$(cat "$work/x.log")" = "old export" ]; then :
  elif [ "$rc" -eq 0 ] && cmp -s "$work/x.log" "$tmp/export.ref"; then :
  else bad "export, call $n of $total failing: exit $rc and x.log $(wc -c <"$work/x.log") bytes"; continue; fi
  no_leftovers "export, call $n" && pass=$((pass + 1))
done
echo "export-autotvm: $total calls, each failed once"

# ---- 2. import-autotvm and merge-db into a database that holds records ----
fresh_db() { rm -rf "$work" && mkdir "$work" && "$mtgpu" import-autotvm "$tmp/a.log" --db "$work/d.db" >/dev/null; }
fresh_db
na=$(db_ok "$work/d.db")
for cmd in import merge; do
  if [ "$cmd" = import ]; then set -- import-autotvm "$tmp/b.log" --db d.db; else set -- merge-db "$tmp/b.db" --db d.db; fi
  fresh_db
  faulty 0 "$@"
  total=$calls
  want=$(db_ok "$work/d.db")
  for n in $(seq 1 "$total"); do
    fresh_db
    faulty "$n" "$@"
    got=$(db_ok "$work/d.db")
    case "$rc:$got" in
      0:"$want") ;;
      1:[0-9]*) if [ "$got" -lt "$na" ] || [ "$got" -gt "$want" ]; then bad "$cmd, call $n of $total failing: $got records"; continue; fi ;;
      *) bad "$cmd, call $n of $total failing: exit $rc, database $got"; continue ;;
    esac
    # A rerun without faults completes it.
    faulty 0 "$@"
    if [ "$rc" -ne 0 ] || [ "$(db_ok "$work/d.db")" != "$want" ]; then bad "$cmd, call $n: the rerun ended with exit $rc, $(db_ok "$work/d.db") records"; continue; fi
    pass=$((pass + 1))
  done
  echo "$cmd: $total calls, each failed once ($na records before, $want after)"
done

# ---- 3. a short tune (replayed: no device) into a new database ----
fresh_tune() { rm -rf "$work" && mkdir "$work"; }
tune_args=(tune "$rwl" --simulate "$data" --db t.db --trials 2 --cost-model random)
fresh_tune
faulty 0 "${tune_args[@]}"
total=$calls
for n in $(seq 1 "$total"); do
  fresh_tune
  faulty "$n" "${tune_args[@]}"
  got=$(db_ok "$work/t.db")
  case "$rc:$got" in
    0:2) ;;
    1:missing | 1:empty | 1:0 | 1:1) ;;
    *) bad "tune, call $n of $total failing: exit $rc, database $got"; continue ;;
  esac
  faulty 0 "${tune_args[@]}"
  if [ "$rc" -ne 0 ] || [ "$(db_ok "$work/t.db")" != 2 ]; then bad "tune, call $n: the rerun ended with exit $rc, $(db_ok "$work/t.db") records"; continue; fi
  pass=$((pass + 1))
done
echo "tune --trials 2: $total calls, each failed once"

# ---- 4. train --out over an older model: the old file or the whole new one ----
cp "$data" "$tmp/small.db"
sqlite3 "$tmp/small.db" "DELETE FROM records WHERE id > 300; VACUUM"
train_args=(train --db "$tmp/small.db" --out m.gnn --epochs 1 --hidden 4 --layers 1)
rm -rf "$work" && mkdir "$work"
if "$mtgpu" train --db "$tmp/small.db" --out "$tmp/old.gnn" --epochs 1 --hidden 4 --layers 1 --seed 2 >/dev/null 2>&1 &&
   (cd "$work" && "$mtgpu" "${train_args[@]}" >/dev/null 2>&1) && mv "$work/m.gnn" "$tmp/new.gnn"; then
  fresh_train() { rm -rf "$work" && mkdir "$work" && cp "$tmp/old.gnn" "$work/m.gnn"; }
  fresh_train
  faulty 0 "${train_args[@]}"
  total=$calls
  for n in $(seq 1 "$total"); do
    fresh_train
    faulty "$n" "${train_args[@]}"
    if [ "$rc" -eq 1 ] && cmp -s "$work/m.gnn" "$tmp/old.gnn"; then :
    elif [ "$rc" -eq 0 ] && cmp -s "$work/m.gnn" "$tmp/new.gnn"; then :
    else bad "train, call $n of $total failing: exit $rc"; continue; fi
    no_leftovers "train, call $n" && pass=$((pass + 1))
  done
  echo "train: $total calls, each failed once"
else
  bad "train without faults failed"
fi

echo "faults: $runs runs, $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
