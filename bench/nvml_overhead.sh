#!/bin/sh
# NVML overhead: 8 simulated H200s (tests/gpusim/scenarios/dips.scn) sampled every 100 ms.
#  1. the collector alone (nvml_overhead_bench: collector_nvml + a sink drained once a second);
#  2. the whole agent: `gpuscope run --interval 100ms -- sleep SECONDS` with the 8 GPUs and without
#     NVML, so the difference is what the GPUs cost, storing their points included.
# CPU time spent inside the simulated libnvidia-ml.so.1 is excluded both times (the simulator
# accounts for itself; see tests/gpusim/README.md): a real driver's cost is not the agent's code.
# Target: the collector < 0.5 % of one core.
#   usage: bench/nvml_overhead.sh [BUILD_DIR] [SECONDS]     (default: build, 20)
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
secs=${2:-20}
bin=$build/tests/gpusim/nvml_overhead_bench
[ -x "$bin" ] || { echo "build first: cmake --build $build --target nvml_overhead_bench gpusim" >&2; exit 2; }
export GPUSCOPE_NVML_LIB="$build/tests/gpusim/libnvidia-ml.so.1"
export GPUSIM_SCENARIO="${GPUSIM_SCENARIO:-$here/tests/gpusim/scenarios/dips.scn}"

echo "== 1. NVML collector alone: 8 simulated GPUs, 100 ms interval, ${secs} s"
GPUSIM_JOBPID=$$ "$bin" "$secs" 100

[ -x "$build/gpuscope" ] || exit 0
echo "== 2. whole agent: gpuscope run --interval 100ms -- sleep ${secs}, with and without the 8 GPUs"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 - "$build/gpuscope" "$secs" "$tmp" <<'EOF'
import os, resource, subprocess, sys
gs, secs, tmp = sys.argv[1], sys.argv[2], sys.argv[3]

def run(name, gpus):
    env = dict(os.environ, GPUSCOPE_STORE="sqlite://" + os.path.join(tmp, "b.db"), GPUSIM_CPU_FILE=os.path.join(tmp, name))
    if not gpus:
        env["GPUSCOPE_NVML_LIB"] = "/nonexistent/libnvidia-ml.so.1"
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([gs, "run", "--quiet", "--name", name, "--interval", "100ms", "--", "sleep", secs], env=env, check=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
    sim = 0.0
    if gpus:
        with open(os.path.join(tmp, name)) as f:
            sim = int(f.read().split()[0]) / 1e9
    return cpu - sim, sim

with_gpus, sim = run("gpus", True)
without, _ = run("nogpus", False)
s = float(secs)
print(f"agent with 8 GPUs: {100 * with_gpus / s:.3f} % of one core ({sim:.3f} s inside the simulated library excluded)")
print(f"agent without NVML: {100 * without / s:.3f} % of one core")
print(f"the 8 GPUs cost the agent {100 * (with_gpus - without) / s:.3f} % of one core (collect + store), "
      "start-up and run end included")
EOF
