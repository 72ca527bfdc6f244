#!/bin/sh
# Installs mtgpu from a build tree into a temporary prefix, builds
# examples/embed_conv.c against it through find_package(mtgpu) and through
# pkg-config, and runs both.
#   test_example.sh BUILD_DIR SOURCE_DIR
# Exit 77 (skip) when there is no device to run on.
set -eu
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mtgpu-test-example-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"

# Sanitized builds: the installed library needs the sanitizer runtime at link time.
san_flags=""
if grep -q '^MTGPU_SANITIZE:BOOL=ON' "$build/CMakeCache.txt"; then
    san_flags="-fsanitize=address,undefined"
fi

# Every installed target must exist; building them is a no-op when up to date.
# A build with MTGPU_TUNING=OFF (the inference library alone) has no CLI or worker.
targets="mtgpu"
if cmake --build "$build" --target help 2>/dev/null | grep -q 'mtgpu_cli'; then targets="$targets mtgpu_worker mtgpu_cli"; fi
if cmake --build "$build" --target help 2>/dev/null | grep -q 'mtgpu_cuda'; then targets="$targets mtgpu_cuda"; fi
# shellcheck disable=SC2086
cmake --build "$build" --target $targets -j2 >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; exit 1; }
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; exit 1; }
for f in include/mtgpu/mtgpu.h include/mtgpu/version.h include/mtgpu/embed.h include/mtgpu/executor.h lib/libmtgpu.a lib/cmake/mtgpu/mtgpuConfig.cmake \
         lib/cmake/mtgpu/mtgpuConfigVersion.cmake lib/cmake/mtgpu/mtgpuTargets.cmake lib/pkgconfig/mtgpu.pc; do
    [ -e "$prefix/$f" ] || { echo "not installed: $f"; exit 1; }
done

# Internal headers stay in the source tree.
for f in ir/ir.h ir/template.h gnn/gnn.h tuner/costmodel.h; do
    [ ! -e "$prefix/$f" ] || { echo "internal header installed: $f"; exit 1; }
done

# 1. CMake: find_package(mtgpu)
cmake -S "$src/examples" -B "$tmp/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_C_FLAGS="$san_flags" -DCMAKE_EXE_LINKER_FLAGS="$san_flags" >"$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log"; exit 1; }
cmake --build "$tmp/cmake-build" >"$tmp/cmake-build.log" 2>&1 || { cat "$tmp/cmake-build.log"; exit 1; }

# 2. pkg-config (static: --static brings Libs.private and Requires.private)
PKG_CONFIG_PATH="$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export PKG_CONFIG_PATH
pkg-config --exists mtgpu || { echo "pkg-config does not find mtgpu"; exit 1; }
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra $san_flags "$src/examples/embed_conv.c" -o "$tmp/embed_conv_pc" $(pkg-config --cflags --libs --static mtgpu) \
    || { echo "pkg-config build failed: cc ... $(pkg-config --cflags --libs --static mtgpu)"; exit 1; }

status=0
for exe in "$tmp/cmake-build/embed_conv" "$tmp/embed_conv_pc"; do
    set +e
    "$exe" - "n=1,c=16,h=14,w=14,k=16,r=3,s=3,pad=1"
    rc=$?
    set -e
    if [ $rc -eq 77 ]; then echo "skipped: no device"; exit 77; fi
    if [ $rc -ne 0 ]; then echo "FAIL: $exe exited $rc"; status=1; fi
done
[ $status -eq 0 ] && echo "example built with find_package and pkg-config, both ran correctly"
exit $status
