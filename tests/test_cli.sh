#!/usr/bin/env bash
# The mtgpu command as a user meets it: help, bad input, JSON output, exit codes.
#   tests/test_cli.sh PATH/TO/mtgpu
set -u
mtgpu="$1"
tmp=$(mktemp -d /tmp/mtgpu-test-cli-XXXXXX)
trap 'umount "$tmp/ro" 2>/dev/null; umount "$tmp/full" 2>/dev/null; chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
export MTGPU_DB="$tmp/tuning.db"
pass=0 fail=0

# expect CODE DESCRIPTION -- ARGS...: runs mtgpu with ARGS, checks the exit code.
expect() {
  local want="$1" what="$2"
  shift 3
  "$mtgpu" "$@" >"$tmp/out" 2>"$tmp/err"
  local got=$?
  if [ "$got" -eq "$want" ]; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL: $what: 'mtgpu $*' exited $got, expected $want"
    sed 's/^/    /' "$tmp/err" | head -5
  fi
}
# contains FILE TEXT DESCRIPTION
contains() {
  if grep -q -- "$2" "$tmp/$1"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $3: '$2' not in $1"; fi
}

expect 0 "top-level help" -- --help
contains out "commands:" "help lists commands"
expect 2 "no command" --
expect 2 "unknown command" -- frobnicate
for cmd in devices conv tasks tune train eval-model merge-db refine run; do
  expect 0 "$cmd --help" -- "$cmd" --help
  contains out "usage: mtgpu $cmd" "$cmd help text"
done
expect 2 "conv without workload" -- conv
expect 2 "malformed workload" -- conv "n=1,c=64,h=56"
contains err "missing field 'w'" "names the missing field"
expect 2 "impossible workload" -- conv "c=4,h=3,w=3,k=4,r=5,s=5"
contains err "output height" "names the output size"
expect 2 "bad groups" -- conv "c=6,h=8,w=8,k=4,r=3,s=3,groups=4"
contains err "divisible by groups" "names groups"
expect 2 "unknown template" -- conv "c=4,h=8,w=8,k=4,r=3,s=3" --template nope
expect 2 "config outside the space" -- conv "c=4,h=8,w=8,k=4,r=3,s=3" --template gemm --config "tile_k=3x3x3"
expect 2 "unknown option" -- conv "c=4,h=8,w=8,k=4,r=3,s=3" --frob
expect 2 "bad --random" -- conv "c=4,h=8,w=8,k=4,r=3,s=3" --random -2
expect 2 "unknown network" -- tasks resnet1000
expect 0 "tasks" -- tasks resnet50 --json
contains out '"count"' "tasks JSON"
expect 0 "print sources" -- conv "c=4,h=8,w=8,k=4,r=3,s=3,pad=1" --random 2 --source
contains out "__kernel" "OpenCL source"
contains out "__global__" "CUDA source"
expect 2 "--reference with --source" -- conv "c=4,h=8,w=8,k=4,r=3,s=3,pad=1" --reference --source
expect 2 "unknown cost model" -- tune "c=4,h=8,w=8,k=4,r=3,s=3" --cost-model nope
expect 2 "unknown template" -- tune "c=4,h=8,w=8,k=4,r=3,s=3" --templates gemm,nope
contains err "unknown template 'nope'" "names the unknown template"
expect 2 "--model without a gnn" -- tune "c=4,h=8,w=8,k=4,r=3,s=3" --cost-model xgb --model "$tmp/m.gnn"
expect 2 "refine an unknown network" -- refine resnet1000
expect 2 "refine with no candidates" -- refine squeezenet1_1 --candidates 0
expect 2 "refine with a bad --min-gain" -- refine squeezenet1_1 --min-gain 2
expect 1 "refine a missing database" -- refine squeezenet1_1 --db "$tmp/none/x.db"
contains err "cannot open" "names the database problem"
expect 2 "tune with a bad --refine" -- tune squeezenet1_1 --refine 99
expect 2 "train without --out" -- train --db "$tmp/tuning.db"
expect 2 "train with xgb" -- train --db "$tmp/tuning.db" --out "$tmp/m.gnn" --cost-model xgb
expect 2 "eval-model with both" -- eval-model --db "$tmp/tuning.db" --model "$tmp/m.gnn" --cost-model xgb
expect 2 "eval-model bad fraction" -- eval-model --db "$tmp/tuning.db" --cost-model xgb --holdout-frac 2
expect 1 "eval-model on a missing database" -- eval-model --db "$tmp/none/x.db" --cost-model xgb
expect 2 "merge-db without a source" -- merge-db --db "$tmp/m2.db"
# Empty option values are errors everywhere, never "the default" or "none".
expect 2 "an empty --templates" -- tune "c=4,h=8,w=8,k=4,r=3,s=3" --templates ''
contains err "empty" "says the value is empty"
expect 2 "an empty --db, best" -- best "c=4,h=8,w=8,k=4,r=3,s=3" --db ''
expect 2 "an empty --db, tune" -- tune "c=4,h=8,w=8,k=4,r=3,s=3" --db=
expect 2 "an empty --out" -- export-autotvm --out ''
expect 2 "a bad device spec, collect" -- collect --device nope
# --db in a directory that does not exist: refused, nothing created.
expect 1 "import into a missing directory" -- import-autotvm /dev/null --db "$tmp/none/x.db"
contains err "directory does not exist" "names the missing directory"
if [ ! -e "$tmp/none" ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: --db made a directory"; fi
expect 1 "merge-db of a missing source" -- merge-db "$tmp/none/x.db" --db "$tmp/m2.db"

# Replay (tune --simulate): measurements answered from the records in data/, no device needed.
data="$(cd "$(dirname "$0")/.." && pwd)/data/opencl_dataset.db"
rfp=499a4764cf4600f3 # the device data/opencl_dataset.db was recorded on
rwl="n=1,c=64,h=56,w=56,k=64,r=3,s=3,pad=1"
expect 2 "--simulate needs --db or --no-db" -- tune "$rwl" --simulate "$data"
contains err "no-db" "says where a replay's records may go"
expect 2 "--simulate opens no device" -- tune "$rwl" --simulate "$data" --no-db --device 0
expect 2 "--simulate does not refine" -- tune resnet50 --simulate "$data" --no-db --refine 2
expect 2 "--simulate-device without --simulate" -- tune "$rwl" --simulate-device "$rfp"
expect 2 "--db with --no-db" -- tune "$rwl" --db "$tmp/x.db" --no-db
expect 1 "--simulate of a missing recording" -- tune "$rwl" --simulate "$tmp/none/x.db" --no-db
expect 1 "--simulate of an unrecorded workload" -- tune "n=1,c=3,h=9,w=9,k=5,r=3,s=3" --simulate "$data" --no-db
contains err "no records" "names what is missing"
expect 1 "--simulate-device of another device" -- tune "$rwl" --simulate "$data" --no-db --simulate-device 0123456789abcdef
contains err "$rfp" "lists the devices with records"
cp "$data" "$tmp/recording.db"
expect 1 "a replay into its own recording" -- tune "$rwl" --simulate "$tmp/recording.db" --db "$tmp/recording.db" --trials 4
expect 0 "replay" -- tune "$rwl" --simulate "$data" --db "$tmp/replay.db" --trials 40 --json
contains out '"type": "summary", "target": "[^"]*", "replay": "' "the summary names the recording"
contains out "\"fingerprint\": \"$rfp\", \"trials_done\": 40, \"measured_this_run\": 40" "replays the budget on the recorded device"
# A budget beyond the recording ends with it; a rerun then has nothing left to replay.
expect 0 "replay until the recording is used up" -- tune "$rwl" --simulate "$data" --db "$tmp/replay.db" --trials 100000 --early-stop 0 --cost-model random --json
replayed=$(sed -n 's/.*"type": "summary".*"trials_done": \([0-9]*\),.*/\1/p' "$tmp/out")
if [ -n "$replayed" ] && [ "$replayed" -gt 40 ] && [ "$replayed" -lt 100000 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: replay ended at '$replayed' trials"; fi
expect 0 "replay again" -- tune "$rwl" --simulate "$data" --db "$tmp/replay.db" --trials 100000 --early-stop 0 --cost-model random --json
contains out "\"trials_done\": $replayed, \"measured_this_run\": 0, \"resumed\": $replayed" "nothing is replayed twice"
# Every recorded config replayed: the fastest replayed record is the recording's fastest, time and all.
expect 0 "best of the replay" -- best "$rwl" --db "$tmp/replay.db" --device "$rfp" --json
contains out "\"source\": \"replay:$rfp\"" "replayed records are marked as such"
sed 's/, "source": "[^"]*"//' "$tmp/out" > "$tmp/best_replay"
expect 0 "best of the recording" -- best "$rwl" --db "$data" --device "$rfp" --json
sed 's/, "source": "[^"]*"//' "$tmp/out" > "$tmp/best_recorded"
if cmp -s "$tmp/best_replay" "$tmp/best_recorded"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: the replay's best differs from the recording's"; fi
# One seed, one sequence of configs.
expect 0 "replay with a seed" -- tune "$rwl" --simulate "$data" --no-db --trials 24 --seed 3 --json
grep '"type": "record"' "$tmp/out" > "$tmp/seq1"
expect 0 "replay with the seed again" -- tune "$rwl" --simulate "$data" --no-db --trials 24 --seed 3 --json
grep '"type": "record"' "$tmp/out" > "$tmp/seq2"
if [ "$(wc -l < "$tmp/seq1")" -eq 24 ] && cmp -s "$tmp/seq1" "$tmp/seq2"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: a replay's sequence depends on more than its seed"; fi
# The default cost model: the shipped meta-trained model where one is found, else xgb, said on stderr.
if [ -f "$(dirname "$data")/opencl_gnn_meta.model" ]; then
  expect 0 "replay with the default cost model" -- tune "$rwl" --simulate "$data" --no-db --trials 8
  contains out "cost model gnn-meta from .*opencl_gnn_meta.model" "the default is the shipped gnn-meta model, and says so"
fi
MTGPU_MODEL_DIR="$tmp/no-models" expect 0 "replay with no model file anywhere" -- tune "$rwl" --simulate "$data" --no-db --trials 8
contains out "cost model xgb" "the default falls back to xgb"
contains err "guiding the search with xgb" "says it fell back"
# Meta-training and few-shot evaluation: options, then a small run on the shipped data set.
expect 0 "train --help" -- train --help
contains out "--meta" "train help has --meta"
contains out "meta-sgd" "train help names the algorithms"
contains out "--manifest" "train help has --manifest"
expect 0 "eval-model --help" -- eval-model --help
contains out "--adapt-k" "eval-model help has --adapt-k"
expect 0 "tune --help" -- tune --help
contains out "gnn-meta" "tune help has gnn-meta"
contains out "--adapt-steps" "tune help has --adapt-steps"
db="$tmp/tuning.db"
expect 2 "meta option without --meta" -- train --db "$db" --out "$tmp/m.gnn" --support 8
contains err "add --meta" "says to add --meta"
expect 2 "unknown algorithm" -- train --db "$db" --out "$tmp/m.gnn" --meta --algorithm reptile
expect 2 "zero inner steps" -- train --db "$db" --out "$tmp/m.gnn" --meta --inner-steps 0
expect 2 "too many inner steps" -- train --db "$db" --out "$tmp/m.gnn" --meta --inner-steps 101
expect 2 "zero support" -- train --db "$db" --out "$tmp/m.gnn" --meta --support 0
expect 2 "negative inner rate" -- train --db "$db" --out "$tmp/m.gnn" --meta --inner-lr -0.1
expect 2 "malformed outer rate" -- train --db "$db" --out "$tmp/m.gnn" --meta --outer-lr fast
expect 2 "zero iterations" -- train --db "$db" --out "$tmp/m.gnn" --meta --iterations 0
expect 2 "zero meta-batch" -- train --db "$db" --out "$tmp/m.gnn" --meta --meta-batch 0
expect 2 "unknown init" -- train --db "$db" --out "$tmp/m.gnn" --meta --init random
expect 2 "train with both holdouts" -- train --db "$db" --out "$tmp/m.gnn" --holdout resnet18 --holdout-frac 0.5
expect 2 "negative --adapt-k" -- eval-model --db "$db" --cost-model xgb --adapt-k -1
expect 2 "too large --adapt-k" -- eval-model --db "$db" --cost-model xgb --adapt-k 5000
expect 2 "zero --adapt-repeats" -- eval-model --db "$db" --cost-model xgb --adapt-k 4 --adapt-repeats 0
expect 2 "--adapt-steps without --adapt-k" -- eval-model --db "$db" --cost-model xgb --adapt-steps 5
expect 2 "gnn-meta without a model" -- eval-model --db "$db" --cost-model gnn-meta --adapt-k 4
contains err "needs --model" "says gnn-meta needs a model"
# Without --model, tune looks for the shipped model; none where MTGPU_MODEL_DIR points.
mkdir -p "$tmp/no-models"
MTGPU_MODEL_DIR="$tmp/no-models" expect 1 "tune gnn-meta without a model file anywhere" -- tune "c=4,h=8,w=8,k=4,r=3,s=3" --cost-model gnn-meta
contains err "opencl_gnn_meta.model" "names the shipped model it looked for"
MTGPU_MODEL_DIR="$tmp/no-models" expect 1 "tune gnn-transfer without a model file anywhere" -- tune "c=4,h=8,w=8,k=4,r=3,s=3" --cost-model gnn-transfer
expect 2 "--adapt-steps for gnn-meta" -- tune "c=4,h=8,w=8,k=4,r=3,s=3" --cost-model gnn-meta --model "$tmp/m.gnn" --adapt-steps 5
expect 2 "--adapt-steps for xgb" -- tune "c=4,h=8,w=8,k=4,r=3,s=3" --cost-model xgb --adapt-steps 5
expect 2 "bad --adapt-lr" -- tune "c=4,h=8,w=8,k=4,r=3,s=3" --cost-model gnn-transfer --model "$tmp/m.gnn" --adapt-lr 0
data="$(cd "$(dirname "$0")/.." && pwd)/data/opencl_dataset.db"
if [ -f "$data" ]; then
  cp "$data" "$tmp/data.db"
  # trained on a twentieth of the workloads, evaluated on one of the others
  w="n=1,c=64,h=55,w=55,k=16,r=1,s=1,stride=1,pad=0"
  expect 0 "meta-train" -- train --db "$tmp/data.db" --out "$tmp/meta.gnn" --holdout-frac 0.95 --hidden 8 --layers 1 --epochs 1 --meta \
    --iterations 3 --support 4 --query 4 --meta-batch 2 --manifest "$tmp/manifest.json" --json
  contains out '"training": "meta-trained"' "train JSON says meta-trained"
  contains manifest.json '"training": "meta-trained"' "manifest: how"
  contains manifest.json '"fnv1a64"' "manifest: the data set's hash"
  contains manifest.json '"task_list"' "manifest: the tasks"
  contains manifest.json '"held_out_workloads"' "manifest: the held-out workloads"
  contains manifest.json '"inner_steps": 1' "manifest: the hyper-parameters"
  contains manifest.json '"init": "pooled"' "manifest: meta-training started from pooled training"
  expect 0 "pooled train" -- train --db "$tmp/data.db" --out "$tmp/pooled.gnn" --holdout-frac 0.95 --hidden 8 --layers 1 --epochs 1
  contains out "pooled-trained" "train says pooled-trained"
  expect 0 "few-shot gnn-meta" -- eval-model --db "$tmp/data.db" --model "$tmp/meta.gnn" --holdout "$w" --adapt-k 4 --adapt-repeats 1 --json
  contains out '"kind": "gnn-meta"' "a meta-trained file adapts as gnn-meta"
  contains out '"pairwise_acc"' "few-shot JSON"
  expect 0 "few-shot gnn-transfer" -- eval-model --db "$tmp/data.db" --model "$tmp/pooled.gnn" --holdout "$w" --adapt-k 4 --adapt-repeats 1 \
    --adapt-steps 2 --json
  contains out '"kind": "gnn-transfer"' "a pooled file adapts as gnn-transfer"
  contains out '"adapt_steps": 2' "with the steps given"
  expect 0 "zero-shot xgb" -- eval-model --db "$tmp/data.db" --cost-model xgb --holdout "$w" --adapt-k 0 --adapt-repeats 1
  contains out "0-shot" "says zero-shot"
  expect 1 "gnn-meta given a pooled file" -- eval-model --db "$tmp/data.db" --cost-model gnn-meta --model "$tmp/pooled.gnn" --holdout "$w" --adapt-k 2
  contains err "not meta-trained" "refuses a pooled file for gnn-meta"
  expect 1 "gnn-meta given a missing file" -- eval-model --db "$tmp/data.db" --cost-model gnn-meta --model "$tmp/none.gnn" --holdout "$w" --adapt-k 2
  head -c 100 "$tmp/meta.gnn" > "$tmp/short.gnn"
  expect 1 "a truncated model file" -- eval-model --db "$tmp/data.db" --model "$tmp/short.gnn" --holdout "$w" --adapt-k 2
  contains err "gnn model" "names the model file problem"
  expect 2 "holdout of a network without records" -- eval-model --db "$tmp/data.db" --cost-model xgb --holdout "resnet1000" --adapt-k 2
  if command -v sqlite3 >/dev/null 2>&1; then
    # Records of one ResNet convolution alone: SqueezeNet is held out by being absent, which training
    # accepts (one platform's records may lack a network) and records in its manifest; an evaluation refuses.
    cp "$data" "$tmp/one.db"
    sqlite3 "$tmp/one.db" "DELETE FROM records WHERE workload_id <> (SELECT id FROM workloads WHERE text = 'n=1,c=64,h=56,w=56,k=64,r=3,s=3,stride=1,pad=1')"
    expect 0 "train holding out a network absent from the records" -- train --db "$tmp/one.db" --out "$tmp/one.gnn" --holdout squeezenet1_1 \
      --hidden 8 --layers 1 --epochs 1 --manifest "$tmp/one.json"
    contains one.json '"holdout": "squeezenet1_1"' "manifest: the split as asked"
    expect 2 "eval-model holding out a network absent from the records" -- eval-model --db "$tmp/one.db" --cost-model xgb --holdout squeezenet1_1
    contains err "no convolution of squeezenet1_1 has records" "says the held-out network has no records"
  fi
else
  echo "skipped the data-set checks: no $data"
fi

# Damaged records (edited outside mtgpu): best passes them over; merge-db skips and counts them.
if command -v sqlite3 >/dev/null 2>&1; then
  cp "$data" "$tmp/dmg.db"
  # The slowest valid record of the workload claims 0 ms; three more are damaged another way.
  sqlite3 "$tmp/dmg.db" "UPDATE records SET median_ms = 0 WHERE id = (SELECT r.id FROM records r JOIN workloads w ON w.id = r.workload_id
      WHERE w.text = 'n=1,c=64,h=56,w=56,k=64,r=3,s=3,stride=1,pad=1' AND r.status = 'ok' ORDER BY r.median_ms DESC LIMIT 1);
    UPDATE records SET template = 'retired' WHERE id = 1; UPDATE records SET config = 'tile_f=3x3' WHERE id = 2;
    UPDATE records SET median_ms = 'abc' WHERE id = 3"
  expect 0 "best of the recording" -- best "$rwl" --db "$data" --device "$rfp" --json
  cp "$tmp/out" "$tmp/best_clean"
  expect 0 "best past a 0 ms record" -- best "$rwl" --db "$tmp/dmg.db" --device "$rfp" --json
  if cmp -s "$tmp/out" "$tmp/best_clean"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: a 0 ms record changed best: $(cat "$tmp/out")"; fi
  contains err "damaged median" "best notes the damaged record"
  expect 0 "merge-db past damaged records" -- merge-db "$tmp/dmg.db" --db "$tmp/dmg-merged.db" --json
  sound=$(( $(sqlite3 "$data" "SELECT count(*) FROM records") - 4 ))
  contains out "\"records\": $sound, \"inserted\": $sound, \"present\": 0, \"skipped\": 4" "merge-db skips and counts the damaged records"
  contains err "4 damaged records skipped" "merge-db notes them"
else
  echo "skipped the damaged-record checks: no sqlite3 command to damage a database with"
fi

# A database on read-only media, as an inference server's image ships it: the WAL-mode file alone
# (no -wal, no -shm) where nothing can be written. Root is stopped only by a read-only mount.
ro="$tmp/ro"
mkdir "$ro"
romode=""
if [ "$(id -u)" -eq 0 ]; then
  if mount -t tmpfs -o size=16m tmpfs "$ro" 2>/dev/null; then
    cp "$data" "$ro/x.db" && mount -o remount,ro "$ro" && romode="a read-only tmpfs"
  fi
else
  cp "$data" "$ro/x.db" && chmod 0555 "$ro" && romode="a directory of mode 0555"
fi
if [ -n "$romode" ]; then
  echo "read-only media: $romode"
  expect 0 "best from read-only media" -- best "$rwl" --db "$ro/x.db" --device "$rfp" --json
  contains out '"from_db": true' "best reads a database on read-only media"
  expect 0 "export-autotvm from read-only media" -- export-autotvm --db "$ro/x.db" --device "$rfp" --out "$tmp/ro-export.log"
  if [ -s "$tmp/ro-export.log" ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: export from read-only media wrote nothing"; fi
  expect 0 "train from read-only media" -- train --db "$ro/x.db" --out "$tmp/ro.gnn" --epochs 1 --hidden 8 --layers 1
  expect 0 "merge-db from read-only media" -- merge-db "$ro/x.db" --db "$tmp/ro-merged.db"
  contains out "records, " "merge-db counts what it copied"
  expect 1 "tune into read-only media" -- tune "$rwl" --simulate "$data" --db "$ro/x.db" --trials 2
  contains err "cannot be written" "a writer on read-only media is told why"
  if [ ! -e "$ro/x.db-shm" ] && [ ! -e "$ro/x.db-wal" ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: files made on read-only media"; fi
  if [ "$(id -u)" -eq 0 ]; then umount "$ro"; else chmod 0755 "$ro"; fi
else
  echo "skipped read-only media checks: as root they need a read-only mount, and a tmpfs cannot be mounted here"
fi

# A full disk: a failed export leaves the old file whole and no temporary file (a 64 KiB tmpfs, as root).
mkdir "$tmp/full"
if [ "$(id -u)" -eq 0 ] && mount -t tmpfs -o size=64k tmpfs "$tmp/full" 2>/dev/null; then
  echo "old export" > "$tmp/full/x.log"
  expect 1 "export-autotvm onto a full disk" -- export-autotvm --db "$data" --device "$rfp" --out "$tmp/full/x.log"
  contains err "No space left on device" "a full disk is named as the cause"
  if [ "$(cat "$tmp/full/x.log")" = "old export" ] && [ "$(ls "$tmp/full" | wc -l)" -eq 1 ]; then pass=$((pass + 1)); else
    fail=$((fail + 1)); echo "FAIL: a failed export changed $tmp/full: $(ls "$tmp/full")"; fi
  umount "$tmp/full"
  # A nearly full disk: the database's error names the cause.
  mount -t tmpfs -o size=256k tmpfs "$tmp/full"
  head -c 3000 "$(dirname "$0")/data/tophub/cuda_v0.10.log" | head -3 > "$tmp/three.log"
  expect 0 "a database on the small disk" -- import-autotvm "$tmp/three.log" --db "$tmp/full/x.db"
  dd if=/dev/zero of="$tmp/full/fill" bs=4k 2>/dev/null
  cat "$tmp/three.log" "$(dirname "$0")/data/tophub/opencl_v0.04.log" > "$tmp/more.log"
  expect 1 "import onto a full disk" -- import-autotvm "$tmp/more.log" --db "$tmp/full/x.db"
  contains err "No space left on device" "a full disk under the database is named as the cause"
  umount "$tmp/full"
else
  echo "skipped the full-disk check: it mounts a 64 KiB tmpfs, which needs root (tests/test_faults.sh injects the failures without)"
fi

if "$mtgpu" devices >/dev/null 2>&1; then
  expect 0 "devices --json" -- devices --json
  contains out '"fingerprint"' "device JSON"
  expect 0 "devices" -- devices
  contains out "cuda" "the CUDA backend is listed, or said to be unavailable and why"
  # On a CUDA device cuDNN is timed beside the configs; elsewhere the output says there is no reference.
  expect 0 "conv --reference" -- conv "n=1,c=8,h=12,w=12,k=8,r=3,s=3,pad=1" --random 1 --json --repeats 2 --reference
  contains out '"cudnn_ms"' "conv JSON has cuDNN's time (or null)"
  contains out '"reference": ' "conv JSON says what the reference was"
  expect 0 "conv random JSON" -- conv "n=1,c=8,h=12,w=12,k=8,r=3,s=3,pad=1" --random 2 --json --repeats 2
  contains out '"status": "ok"' "conv result ok"
  contains out '"max_rel_err"' "conv result has error"
  # Take the config just printed and run it alone.
  cfg=$(sed -n 's/.*"template": "\([a-z]*\)", "config": "\([^"]*\)".*/\1 \2/p' "$tmp/out" | head -1)
  expect 0 "conv --config" -- conv "n=1,c=8,h=12,w=12,k=8,r=3,s=3,pad=1" --template ${cfg%% *} --config "${cfg#* }" --repeats 2
  # --config default: one result per accepting template (3x3 stride 1: direct, gemm, kvec, wino).
  expect 0 "conv --config default" -- conv "n=1,c=8,h=12,w=12,k=8,r=3,s=3,pad=1" --config default --json --repeats 2
  for t in direct gemm kvec wino; do contains out "\"template\": \"$t\"" "conv --config default runs $t's default"; done
  if grep -v '"status": "ok"' "$tmp/out" | grep -q .; then fail=$((fail + 1)); echo "FAIL: a default config did not run correctly"; else pass=$((pass + 1)); fi
  # --cold: timed with the weights evicted before each run, and said so where the device can (a CPU).
  expect 0 "conv --cold" -- conv "n=1,c=8,h=12,w=12,k=8,r=3,s=3,pad=1" --template kvec --config default --cold --json --repeats 2
  contains out '"status": "ok"' "conv --cold result ok"
  if "$mtgpu" devices --json 2>/dev/null | grep -q '"is_cpu": 1'; then contains out '"cold": true' "conv --cold on a CPU device is cold"; fi
  expect 2 "tune --measure bogus" -- tune "n=1,c=8,h=12,w=12,k=8,r=3,s=3,pad=1" --measure bogus
  contains err "warm or cold" "tune --measure names its values"
  expect 0 "conv --config default --source" -- conv "n=1,c=8,h=12,w=12,k=8,r=1,s=1" --template gemm --config default --source
  contains out "__kernel" "the default config's OpenCL source"
  expect 0 "tune a workload" -- tune "n=1,c=8,h=12,w=12,k=8,r=3,s=3,pad=1" --trials 3 --batch 3 --json
  contains out '"type": "summary"' "tune summary JSON"
  expect 0 "tune one template" -- tune "n=1,c=8,h=12,w=12,k=8,r=3,s=3,pad=1" --trials 2 --batch 2 --templates kvec --db "$tmp/kvec.db" --json
  contains out '"template": "kvec"' "tune --templates measures that template"
  if grep -q '"template": "gemm"' "$tmp/out"; then fail=$((fail + 1)); echo "FAIL: tune --templates kvec measured gemm"; else pass=$((pass + 1)); fi
  # refine: squeezenet against the records just tuned (none of its workloads: every set is the defaults).
  expect 0 "refine --dry-run" -- refine squeezenet1_1 --db "$tmp/tuning.db" --candidates 1 --passes 2 --dry-run --json
  contains out '"type": "refine"' "refine JSON"
  contains out '"stored": 0' "a dry run stores nothing"
  expect 0 "refine" -- refine squeezenet1_1 --db "$tmp/tuning.db" --candidates 2 --passes 2
  contains out "preferences: 0 stored" "refine keeps the fastest records when all sets agree"
  expect 2 "bad device" -- conv "n=1,c=8,h=12,w=12,k=8,r=3,s=3,pad=1" --device opencl:x
  expect 2 "bad device, tune" -- tune "n=1,c=8,h=12,w=12,k=8,r=3,s=3,pad=1" --device opencl:x
  expect 2 "bad device, best" -- best "n=1,c=8,h=12,w=12,k=8,r=3,s=3,pad=1" --device opencl:x
  expect 2 "bad device, run" -- run squeezenet1_1 --device opencl:x
  expect 1 "a device that is not there" -- tune "n=1,c=8,h=12,w=12,k=8,r=3,s=3,pad=1" --device opencl:99 --trials 1
  expect 1 "a device that is not there, conv" -- conv "n=1,c=8,h=12,w=12,k=8,r=3,s=3,pad=1" --device opencl:99 --random 1
  # merge-db: the tuned records into a new database, then again (nothing new); bad sources fail.
  expect 0 "merge-db" -- merge-db "$tmp/tuning.db" --db "$tmp/merged.db" --json
  contains out '"inserted": 3' "merge-db copies every record"
  expect 0 "merge-db again" -- merge-db "$tmp/tuning.db" --db "$tmp/merged.db"
  contains out "0 new, 3 already there" "merge-db keeps what is there"
  expect 1 "merge-db into itself" -- merge-db "$tmp/merged.db" --db "$tmp/merged.db"
  echo "not a database" > "$tmp/junk.db"
  # Workers never outlive their tuner: killed with SIGKILL, or ended by a second Ctrl-C.
  children() { # the pids whose parent is $1
    for f in /proc/[0-9]*/stat; do
      read -r cpid _ _ cppid _ < "$f" 2>/dev/null && [ "$cppid" = "$1" ] && echo "$cpid"
    done
  }
  alive() { [ -r "/proc/$1/stat" ] && [ "$(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null)" != "Z" ]; }
  # start_tune DB: a long tune in the background; sets tpid and kids (its timing worker and compilers) once there are two.
  start_tune() {
    "$mtgpu" tune "n=1,c=8,h=12,w=12,k=8,r=3,s=3,pad=1" --trials 2000 --batch 4 --early-stop 0 --cost-model random --db "$1" \
      >"$tmp/bg.out" 2>&1 &
    tpid=$!
    kids=""
    for _ in $(seq 1 1200); do
      kids=$(children "$tpid")
      [ "$(echo "$kids" | wc -w)" -ge 2 ] && grep -q '^\[' "$tmp/bg.out" && break
      sleep 0.1
    done
  }
  # workers_gone WHAT: every pid of $kids has ended within 5 s.
  workers_gone() {
    for _ in $(seq 1 50); do
      left=""
      for k in $kids; do alive "$k" && left="$left $k"; done
      [ -z "$left" ] && break
      sleep 0.1
    done
    if [ -n "$kids" ] && [ -z "$left" ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1: workers '$kids' left running:$left"; fi
  }
  start_tune "$tmp/kill.db"
  kill -KILL "$tpid"
  wait "$tpid" 2>/dev/null
  workers_gone "a tuner killed with SIGKILL"
  start_tune "$tmp/int.db"
  kill -INT "$tpid"
  wait "$tpid"
  rc=$?
  if [ "$rc" -eq 130 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: an interrupted tune exited $rc, expected 130"; fi
  contains bg.out "interrupted" "the summary says the tune was interrupted"
  workers_gone "a tuner stopped by Ctrl-C"
  start_tune "$tmp/int2.db"
  kill -INT "$tpid"
  kill -INT "$tpid"
  wait "$tpid"
  rc=$?
  if [ "$rc" -eq 130 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: a tune stopped by a second Ctrl-C exited $rc, expected 130"; fi
  workers_gone "a tuner ended by a second Ctrl-C"
  expect 1 "merge-db of a corrupt file" -- merge-db "$tmp/junk.db" --db "$tmp/merged.db"
  contains err "not a usable SQLite database" "merge-db names the problem"
  expect 0 "merged records are found" -- best "n=1,c=8,h=12,w=12,k=8,r=3,s=3,pad=1" --db "$tmp/merged.db" --json
  contains out '"from_db": true' "best reads the merged database"
  if [ -f "$tmp/meta.gnn" ]; then
    # tuning with a meta-trained model: zero-shot first, then adapted on the records
    expect 0 "tune with gnn-meta" -- tune "n=1,c=8,h=12,w=12,k=8,r=3,s=3,pad=1" --trials 4 --batch 2 --templates direct \
      --cost-model gnn-meta --model "$tmp/meta.gnn" --db "$tmp/meta.db" --json
    contains out '"type": "summary"' "tune with gnn-meta finishes"
    expect 1 "tune with gnn-meta given a pooled file" -- tune "n=1,c=8,h=12,w=12,k=8,r=3,s=3,pad=1" --trials 2 --batch 2 \
      --cost-model gnn-meta --model "$tmp/pooled.gnn" --db "$tmp/meta.db"
    contains err "not meta-trained" "tune refuses a pooled file for gnn-meta"
  fi
else
  echo "skipped device checks: no device (mtgpu devices failed)"
fi

echo "cli: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
