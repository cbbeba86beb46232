#!/bin/sh
# Per-call cost of the CUDA source's probes (issue 7, item 1), measured in one run against
# the bare mechanism. Usage: sudo bench/uprobe_cost.sh [build-dir] [calls] [rounds]
# Runs gw_uprobe_cost on the do-nothing target libraries (the mechanism alone), then on the
# simulated runtime (runtime calls nest into driver calls there, so gpuwhy's column for a
# runtime sync includes the nested driver pair that the bare column does not).
set -eu
build=${1:-build}
calls=${2:-200000}
rounds=${3:-5}
cmake --build "$build" -j2 --target gw_uprobe_cost gwsim_libs >/dev/null
echo "== do-nothing target ($(uname -r), $(nproc) CPUs, $(date -u +%FT%TZ))"
"$build/bench/gw_uprobe_cost" --calls "$calls" --rounds "$rounds"
echo
echo "== simulated runtime"
"$build/bench/gw_uprobe_cost" --runtime "$build/sim/lib/libcudart.so.13" \
  --driver "$build/sim/lib/libcuda.so.1" --calls "$calls" --rounds "$rounds"
