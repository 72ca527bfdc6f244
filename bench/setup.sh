#!/usr/bin/env bash
# Installs what the benchmarks need on top of scripts/setup.sh, on Debian 12 (as
# root, or with sudo): oneDNN for bench_onednn_convs (the vendor reference on the
# CPU) and matplotlib for bench/plot.py. Neither is needed to build or test mtgpu.
# Idempotent: packages already present are not fetched again.
set -euo pipefail
pkgs=(libdnnl-dev python3-matplotlib)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "bench/setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
