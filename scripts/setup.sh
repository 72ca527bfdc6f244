#!/usr/bin/env bash
# Installs what mtgpu needs to build and test on Debian 12 (as root, or with sudo),
# plus any further Debian packages named as arguments (bench/common/setup.sh uses that).
# Idempotent: packages already present are not fetched again.
set -euo pipefail
pkgs=(build-essential cmake pkg-config clang
      pocl-opencl-icd ocl-icd-opencl-dev opencl-headers clinfo
      libcmocka-dev libsqlite3-dev libxgboost-dev libopenblas-dev
      libopenmpi-dev openmpi-bin "$@")
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The CUDA toolkit is optional: with nvcc/NVRTC present the CUDA module is built too.
