#!/bin/sh
# shellcheck disable=SC2086 # the benchmarks' option strings are meant to split
# bench/run_all.sh: every gpuscope benchmark, one after the other (docs/benchmarks.md explains each
# and keeps the reference results). `make bench` runs it.
#
#   bench/run_all.sh [--quick] [--build DIR]
#
# Default: about 25 minutes (agent cost over 5 minutes, job cost with 4 interleaved repetitions, a
# week of 8-GPU 10 Hz data into the store). --quick: about 5 minutes, for a look. DIR defaults to
# $BUILD, else build/; it is configured and built first. Results are printed and kept in
# DIR/bench-results.txt. Peers (sysstat, collectd, node-exporter, glances) are installed with
# apt-get when run as root; otherwise the exact apt-get line is printed and their rows skipped.
# Costs are CPU-seconds (cgroup accounting as root), not wall time: other work on the machine
# adds noise but does not bill the agents.
set -eu
cd "$(dirname "$0")/.."
QUICK=0
BUILD_DIR=${BUILD:-build}
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --build) BUILD_DIR=$2; shift ;;
    --build=*) BUILD_DIR=${1#--build=} ;;
    -h|--help) sed -n '3,14p' "$0"; exit 0 ;;
    *) echo "run_all.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$BUILD_DIR" -j "$(nproc 2>/dev/null || echo 2)" >/dev/null
OUT="$BUILD_DIR/bench-results.txt"

if [ "$QUICK" = 1 ]; then
  OVERHEAD="--seconds 30"; AGENTS="--minutes 1 --warmup 10"; JOB="--reps 2 --steps 80"
  STORE="--hours 12 --plain-hours 0.5"; RES="--seconds 20"; LIVE="--seconds 10"; EST="--seconds 5"
else
  OVERHEAD="--seconds 60"; AGENTS="--minutes 5"; JOB="--reps 6 --steps 100"
  STORE="--days 7 --plain-hours 1"; RES="--seconds 60"; LIVE="--seconds 30"; EST="--seconds 10"
fi

# Runs one benchmark; a failure is reported and the others still run.
bench() {
  title=$1; shift
  echo "== $title"
  "$@" || echo "FAILED (exit $?): $*"
  echo
}

{
  echo "gpuscope benchmarks — $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')$( [ "$QUICK" = 1 ] && echo ', --quick')"
  echo "machine: $(nproc) CPUs, $(uname -sr), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  echo
  bench "1. agent overhead at 100 ms vs the procfs floor (bench/overhead.py $OVERHEAD)" \
    $PY bench/overhead.py --build "$BUILD_DIR" $OVERHEAD
  bench "2a. agent cost beside sadc, collectd, node-exporter, glances (bench/agents.py $AGENTS)" \
    $PY bench/agents.py --build "$BUILD_DIR" $AGENTS
  bench "2b. cost to the job: PyTorch CPU training (bench/job_cost.py $JOB)" \
    $PY bench/job_cost.py --build "$BUILD_DIR" $JOB
  bench "2c. store: 8 GPUs at 10 Hz (bench/store_bench $STORE)" \
    "$BUILD_DIR/bench/store_bench" --url "sqlite://${TMPDIR:-/tmp}/gpuscope-store-bench.$$.db" $STORE
  bench "2d. resolution: 200 ms GPU idle dips (bench/resolution.py $RES)" \
    $PY bench/resolution.py --build "$BUILD_DIR" $RES
  bench "2f. serve: 200 viewers of one live run (bench/live_viewers.py $LIVE)" \
    $PY bench/live_viewers.py --build "$BUILD_DIR" $LIVE
  bench "2g. Python client: cost per step (bench/client_overhead.py)" \
    env PYTHONPATH=clients/python $PY bench/client_overhead.py
  bench "2h. Python client: sends to a full socket (bench/client_full_socket.py)" \
    $PY bench/client_full_socket.py
  bench "2i. tune --gpus: trials side by side vs one at a time (bench/tune_gpus.py)" \
    $PY bench/tune_gpus.py --build "$BUILD_DIR"
  bench "3. the doctor's estimates against real fixes: 10 CPU PyTorch pairs (bench/estimates.py $EST)" \
    $PY bench/estimates.py --build "$BUILD_DIR" $EST
} 2>&1 | tee "$OUT"
echo "(kept in $OUT)"
