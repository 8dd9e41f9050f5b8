#!/usr/bin/python3
"""bench/overhead: the agent's own cost at the default rate (issue 2).

Runs `gpuscope run --interval 100ms -- sleep 60` and, at the same time, the floor
(procfs_floor.c: the same procfs files, read at the same interval, for the same job PID, doing
nothing else). Both are measured over the same window, after start-up and before the run's end, in
CPU-seconds (cgroup CPU accounting: all threads, exact), and reported per hour of monitoring. The
whole run's CPU (start, store, run end with rollups and diagnosis) is printed too. Peak RSS is
VmHWM read just before the agent exits.

When the simulated NVML library has been built (build/tests/gpusim/libnvidia-ml.so.1), a second
agent watching 8 simulated H200s runs beside the first (not comparable with the floor, which reads
no GPU).

Targets: gpuscope within 1.5x of the floor, peak RSS < 8 MiB (issue 25: libpq and libmicrohttpd are loaded only when used).
usage: bench/overhead.py [--build DIR] [--seconds 60] [--interval-ms 100] [--no-gpus]
"""
import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as bl  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", help="CMake build folder (default $GS_BUILD_DIR or build/)")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--interval-ms", type=int, default=100)
    ap.add_argument("--no-gpus", action="store_true", help="skip the 8-simulated-GPU agent")
    a = ap.parse_args()
    build = bl.build_dir(a.build)
    gpuscope = bl.program(build, "gpuscope")
    floor = bl.program(build, "bench/procfs_floor")
    secs = max(10.0, a.seconds)
    sim = os.path.join(build, "tests/gpusim/libnvidia-ml.so.1")
    scn = os.path.join(bl.REPO, "tests/gpusim/scenarios/busy8_h200.scn")
    with_gpus = not a.no_gpus and os.path.exists(sim) and os.path.exists(scn)
    bl.Meter.use_launcher(build)
    tmp = tempfile.mkdtemp(prefix="gs-overhead-")
    iv = f"{a.interval_ms}ms"
    print(f"overhead: gpuscope run --interval {iv} -- sleep {secs:g}, beside the floor at {iv}")
    print(f"machine:  {bl.machine_facts()}", flush=True)
    try:
        agents = [("gpuscope", {})]
        if with_gpus:
            agents.append(("gpuscope+8gpu", {"GPUSCOPE_NVML_LIB": sim, "GPUSIM_SCENARIO": scn}))
        runs = []
        for name, env in agents:
            m = bl.Meter(name)
            err = open(os.path.join(tmp, name + ".err"), "w")
            m.popen([gpuscope, "run", "--interval", iv, "--store", f"sqlite://{tmp}/{name}.db", "--",
                     "sleep", f"{secs:g}"], env=dict(os.environ, **env), stdout=err, stderr=err)
            runs.append((name, m))
        t_start = time.monotonic()
        job = bl.wait_child(runs[0][1].pid)
        if not job:
            sys.exit("overhead: gpuscope did not start its job")
        mf = bl.Meter("floor")
        fout = open(os.path.join(tmp, "floor.out"), "w")
        mf.popen([floor, str(a.interval_ms), f"{secs - 2.5:g}", str(job)], stdout=fout)
        time.sleep(2.0)
        c1 = {n: m.cpu_s() for n, m in runs + [("floor", mf)]}
        t1 = time.monotonic()
        time.sleep(max(1.0, t_start + secs - 3.5 - time.monotonic()))
        c2 = {n: m.cpu_s() for n, m in runs + [("floor", mf)]}
        t2 = time.monotonic()
        hwm = {n: m.hwm_kib() for n, m in runs + [("floor", mf)]}
        total, status = {}, {}
        for n, m in runs + [("floor", mf)]:
            status[n], total[n], rss = m.wait()
            hwm[n] = max(hwm[n], rss or 0)
        wall = t2 - t1
        ticks = wall * 1000 / a.interval_ms
        print(f"meter:    {mf.kind} (CPU of all threads and children), window {wall:.1f} s = {ticks:.0f} ticks")
        for n, _ in runs + [("floor", mf)]:
            d = c2[n] - c1[n]
            extra = (f"  whole run {total[n]:.3f} CPU-s (start, store, run end)"
                     if n != "floor" and total[n] is not None else "")
            print(f"  {n:<14} {bl.per_hour(d, wall):7.2f} CPU-s/h  {d * 1e6 / ticks:7.1f} us/tick  "
                  f"peak RSS {hwm[n] / 1024:5.1f} MiB{extra}")
        fl = c2["floor"] - c1["floor"]
        g = c2["gpuscope"] - c1["gpuscope"]
        ratio = g / fl if fl > 0 else float("nan")
        rss = hwm["gpuscope"] / 1024
        print(f"  ratio          gpuscope / floor = {ratio:.2f}x (target <= 1.5x: {'met' if ratio <= 1.5 else 'MISSED'}); "
              f"peak RSS {rss:.1f} MiB (target < 8 MiB: {'met' if rss < 8 else 'MISSED'})")
        if with_gpus:
            gg = c2["gpuscope+8gpu"] - c1["gpuscope+8gpu"]
            print(f"  8 simulated GPUs add {bl.per_hour(gg - g, wall):.2f} CPU-s/h "
                  f"({(gg - g) * 1e6 / ticks:.1f} us/tick) over host + process tree")
        else:
            print("  (no simulated GPUs: build tests/gpusim to add the 8-GPU agent)")
        print(f"  floor says: {open(os.path.join(tmp, 'floor.out')).read().strip()}")
        for n, m in runs:
            if status[n] != 0:
                print(f"  warning: {n} exited with {status[n]}: "
                      f"{open(os.path.join(tmp, n + '.err')).read()[-500:]}")
    finally:
        bl.Meter.cleanup()
        for f in os.listdir(tmp):
            os.unlink(os.path.join(tmp, f))
        os.rmdir(tmp)


if __name__ == "__main__":
    main()
