#!/usr/bin/python3
"""bench/tune_gpus: the wall time of a `gpuscope tune` sweep run side by side on N simulated GPUs
(`--gpus 0,...,N-1`, tests/gpusim) against the same sweep one trial at a time. The jobs are
stdlib-only step loops that sleep (a GPU-bound job's host side waits on the GPU), so the figure is
what tune's parallel trials save, not what the CPU can do. Target: side by side at most 1.5 / N of
the sequential wall time (trial start-up and the agents' own ticks keep it above 1 / N).

    /usr/bin/python3 bench/tune_gpus.py [--gpus 4] [--trials 8] [--steps 30] [--build DIR]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import build_dir, machine_facts, program  # noqa: E402

JOB = r'''
import os, socket, sys, time
n = int(sys.argv[1])
path = os.environ.get("GPUSCOPE_SOCKET")
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
for i in range(n):
    time.sleep(0.05)
    if path:
        s.sendto(f"gs1 step {i} data=0.001 compute=0.049 samples=32 t={time.monotonic():.6f}".encode(), path)
'''


def sweep(gs, env, job, steps, trials, gpus):
    vals = ",".join(str(i) for i in range(trials))
    cmd = [gs, "tune", "--name", f"b{gpus}-{time.monotonic_ns()}", "--steps", str(steps - 2), "--warmup", "2",
           "--param", f"k={vals}"]
    if gpus > 1:
        cmd += ["--gpus", ",".join(str(i) for i in range(gpus))]
    cmd += ["--", "/usr/bin/python3", job, str(steps + 5), "{k}"]
    t0 = time.monotonic()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if p.returncode:
        sys.exit(f"bench: tune exited {p.returncode}\n{p.stderr}")
    return wall


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpus", type=int, default=4)
    ap.add_argument("--trials", type=int, default=8)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--build")
    a = ap.parse_args()
    build = build_dir(a.build)
    gs = program(build, "gpuscope")
    sim = program(build, "tests/gpusim/libnvidia-ml.so.1")
    with tempfile.TemporaryDirectory(prefix="gs-bench-tune-") as d:
        job, scn = os.path.join(d, "job.py"), os.path.join(d, "n.scn")
        with open(job, "w") as f:
            f.write(JOB)
        with open(scn, "w") as f:
            f.write(f"device 0-{a.gpus - 1}\n  name NVIDIA H100 PCIe\n  memory 81920MiB\n"
                    "  at 0 util=90 mem_used=20GiB power=300\n")
        env = dict(os.environ, GPUSCOPE_STORE="sqlite://" + os.path.join(d, "s.db"), GPUSCOPE_NVML_LIB=sim,
                   GPUSIM_SCENARIO=scn)
        print(f"machine: {machine_facts()}")
        seq = sweep(gs, env, job, a.steps, a.trials, 1)
        par = sweep(gs, env, job, a.steps, a.trials, a.gpus)
        ratio = par / seq
        print(f"tune, {a.trials} trials of {a.steps} steps of 50 ms: one at a time {seq:.1f} s, "
              f"side by side on {a.gpus} GPUs {par:.1f} s = {ratio:.2f} of sequential "
              f"(target <= {1.5 / a.gpus:.2f}: {'met' if ratio <= 1.5 / a.gpus else 'MISSED'})")


if __name__ == "__main__":
    main()
