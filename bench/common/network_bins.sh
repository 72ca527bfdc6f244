# Sourced by the whole-network benchmarks (vs_onednn, cold_tune) from the
# repository root with $BUILD set: installs what they need, builds mtgpu, its
# worker and bench_onednn_net in $BUILD and copies them to $bin, which the
# run then times: a rebuild of the tree meanwhile cannot change them. Sets
# MTGPU_WORKER and MTGPU_MODEL_DIR for the copies; $bin goes at exit.
bench/common/setup.sh >/dev/null
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target mtgpu_cli mtgpu-worker bench_onednn_net >/dev/null
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
cp "$BUILD"/mtgpu "$BUILD"/mtgpu-worker "$BUILD"/bench_onednn_net "$bin"/
export MTGPU_WORKER="$bin/mtgpu-worker" MTGPU_MODEL_DIR="$PWD/data"

# Sets dbargs, the arguments that give the copied mtgpu database DB ($1), and
# empties the raw-output folder $raw. Without DB: no arguments and a
# database path that does not exist, so that the default configs run.
network_db_and_raw() {
  rm -rf "$raw"
  mkdir -p "$raw"
  if [ -n "$1" ]; then dbargs=(--db "$1"); else dbargs=(); export MTGPU_DB="$bin/none.db"; fi
}
