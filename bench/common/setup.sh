#!/usr/bin/env bash
# Installs what the benchmarks need on top of the build and test packages: oneDNN
# for bench_onednn_convs and bench_onednn_net (the vendor reference on the CPU)
# matplotlib for bench/tune_curves/plot.py and bench/e2e/e2e_report.py, and GNU time for the peak memory
# of bench/cm_train/run.sh. None is needed to build or test mtgpu.
set -euo pipefail
exec "$(dirname "$0")/../../scripts/setup.sh" libdnnl-dev python3-matplotlib time
