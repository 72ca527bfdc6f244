#!/usr/bin/env bash
# Prepares, on the x86-64 development machine, what bench/gpu/run.sh needs on
# a GPU machine that has the NVIDIA driver and the CUDA toolkit but none of
# this project's Debian packages and no network (the lent H200 machine):
#   .gpu/bin/   mtgpu, mtgpu-worker, libmtgpu_cuda.so, the CUDA tests, bench_cm_speed
#   .gpu/deps.tar.xz   the non-system shared libraries they link (SQLite,
#                      XGBoost, OpenBLAS, cmocka, the OpenCL ICD loader, ...),
#                      packed: OpenBLAS alone is 36 MB unpacked
# .gpu is ignored by git; carry it to the GPU machine (device tool: carry
# [".gpu"]) and run `bench/gpu/run.sh OUTDIR` there.
#
#   bench/gpu/prepare.sh            (a few minutes: a Release build with the CUDA module)
set -euo pipefail
cd "$(dirname "$0")/../.."
G=.gpu
BUILD=build-gpu-prep   # outside .gpu: only bin/ and deps travel
command -v nvcc >/dev/null || { echo "prepare: the CUDA toolkit (nvcc, NVRTC, nvJitLink) is needed to build the CUDA module" >&2; exit 1; }
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DMTGPU_CUDA=ON -DMTGPU_TESTS=ON >/dev/null
targets=(mtgpu_cli mtgpu_worker mtgpu_cuda bench_cm_speed)
for t in test_cuda test_cuda_gpu test_gnn test_gnn_gpu; do
  if grep -q "^$t:" <(cmake --build "$BUILD" --target help 2>/dev/null | sed -n 's/^\.\.\. \([a-z_]*\).*/\1:/p'); then targets+=("$t"); fi
done
cmake --build "$BUILD" -j"$(nproc)" --target "${targets[@]}" >/dev/null
rm -rf "$G/bin" "$G/deps" "$G/deps.tar.xz"
mkdir -p "$G/bin" "$G/deps/lib"
cp "$BUILD/mtgpu" "$BUILD/mtgpu-worker" "$BUILD/libmtgpu_cuda.so" "$BUILD/bench_cm_speed" "$G/bin/"
for t in "$BUILD"/tests/test_cuda "$BUILD"/tests/test_cuda_gpu "$BUILD"/tests/test_gnn "$BUILD"/tests/test_gnn_gpu; do
  [ -x "$t" ] && cp "$t" "$G/bin/"
done
# The libraries the GPU machine lacks: everything ldd resolves outside glibc,
# the compiler runtime and CUDA (the GPU machine has its own, matching its driver).
ldd "$G"/bin/* 2>/dev/null | awk '/=> \//{print $3}' | sort -u |
  grep -v -E '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libgcc_s|libstdc\+\+|libcuda|libnvrtc[^/]*|libnvJitLink|libcudnn[^/]*|libcublas[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" "$G/deps/lib/"; done
tar -C "$G/deps" -cJf "$G/deps.tar.xz" lib
rm -rf "$G/deps"
git rev-parse HEAD >"$G/commit" 2>/dev/null || true
du -sh "$G/bin" "$G/deps.tar.xz" | sed 's/^/prepare: /'
echo "prepare: done; carry .gpu and run bench/gpu/run.sh OUTDIR on the GPU machine" >&2
