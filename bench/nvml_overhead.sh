#!/bin/sh
# NVML collector overhead: 8 simulated H200s (tests/gpusim/scenarios/dips.scn) sampled every 100 ms.
# Prints the agent's CPU cost as a share of one core, excluding CPU time spent inside the simulated
# libnvidia-ml.so.1 (which accounts for itself; see tests/gpusim/README.md). Target: < 0.5 %.
#   usage: bench/nvml_overhead.sh [BUILD_DIR] [SECONDS]     (default: build, 20)
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
secs=${2:-20}
bin=$build/tests/gpusim/nvml_overhead_bench
[ -x "$bin" ] || { echo "build first: cmake --build $build --target nvml_overhead_bench gpusim" >&2; exit 2; }
export GPUSCOPE_NVML_LIB="$build/tests/gpusim/libnvidia-ml.so.1"
export GPUSIM_SCENARIO="${GPUSIM_SCENARIO:-$here/tests/gpusim/scenarios/dips.scn}"
export GPUSIM_JOBPID=$$
echo "NVML collector overhead: 8 simulated GPUs, 100 ms interval, ${secs} s"
"$bin" "$secs" 100
