#!/usr/bin/python3
"""bench/resolution: which short GPU idle dips each way of sampling keeps (issue 6d).

Eight simulated H200s (tests/gpusim/scenarios/dips.scn) go idle for 200 ms every 2 s, from 1.8 s to
2.0 s of each period. We run, at the same time:
  - gpuscope at 100 ms and at 1 s: gpu.util_pct comes from the driver's sample buffer
    (nvmlDeviceGetSamples, 6 samples/s in the simulator), so every driver sample is stored;
  - bench/resolution_probe: polls nvmlDeviceGetUtilizationRates every 10 ms for the ground truth,
    and evaluates trackers polling the instant value every 1 s and 10 s (the defaults of most
    experiment trackers and exporters) at 100 phases spread over the polling interval.
For gpuscope, a dip is shown when a stored gpu.util_pct sample below 50 % lies inside the dip's
window (scenario time mapped to the run's time through the driver samples' 1/6 s grid).

usage: bench/resolution.py [--build DIR] [--seconds 60]
Needs the simulated NVML library (build/tests/gpusim/libnvidia-ml.so.1) and an NVML collector that
reads the sample buffer; without them it says so and stops.
"""
import argparse
import csv
import io
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as bl  # noqa: E402

PERIOD, DIP_FROM, DIP_TO, DRIVER_HZ = 2.0, 1.8, 2.0, 6  # dips.scn


def stored_series(gpuscope, store, metric):
    r = subprocess.run([gpuscope, "show", "last", "--store", store, "--metric", metric, "--csv"],
                       capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(r.stderr.strip())
    out = {}
    for row in csv.DictReader(io.StringIO(r.stdout)):
        out.setdefault(row["labels"], []).append((float(row["t_s"]), float(row["value"])))
    return out


def grid_offset(ts):
    """Scenario time 0 in run time, from the driver samples' timestamps (k / DRIVER_HZ + offset)."""
    fr = sorted((t * DRIVER_HZ) % 1.0 for t in ts)
    if not fr:
        return 0.0
    # circular median: rotate so the largest gap is at the wrap point
    gaps = [(fr[(i + 1) % len(fr)] - fr[i]) % 1.0 for i in range(len(fr))]
    start = (gaps.index(max(gaps)) + 1) % len(fr)
    rot = fr[start:] + [x + 1.0 for x in fr[:start]]
    return (statistics.median(rot) % 1.0) / DRIVER_HZ


def dips_shown(samples):
    ts = [t for t, _ in samples]
    o = grid_offset(ts)
    first, last = ts[0], ts[-1]
    total = shown = 0
    k = 0
    while True:
        a, b = k * PERIOD + DIP_FROM + o, k * PERIOD + DIP_TO + o
        k += 1
        if b > last:
            break
        if a < first:
            continue
        total += 1
        shown += any(a - 1e-3 <= t < b + 1e-3 and v < 50 for t, v in samples)
    return shown, total


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", help="CMake build folder (default $GS_BUILD_DIR or build/)")
    ap.add_argument("--seconds", type=float, default=60)
    a = ap.parse_args()
    build = bl.build_dir(a.build)
    gpuscope = bl.program(build, "gpuscope")
    lib = os.path.join(build, "tests/gpusim/libnvidia-ml.so.1")
    scn = os.path.join(bl.REPO, "tests/gpusim/scenarios/dips.scn")
    if not (os.path.exists(lib) and os.path.exists(scn)):
        print(f"resolution: skipped: needs {lib} and {scn} (the simulated NVML library)")
        return
    probe = bl.program(build, "bench/resolution_probe")
    tmp = tempfile.mkdtemp(prefix="gs-resolution-")
    env = dict(os.environ, GPUSCOPE_NVML_LIB=lib, GPUSIM_SCENARIO=scn)
    secs = f"{a.seconds:g}"
    print(f"resolution: {scn.replace(bl.REPO + '/', '')}: 8 GPUs idle 200 ms every 2 s; {secs} s")
    try:
        runs = {}
        for iv in ("100ms", "1s"):
            store = f"sqlite://{tmp}/{iv}.db"
            runs[iv] = (store, subprocess.Popen([gpuscope, "run", "--quiet", "--interval", iv, "--store", store,
                                                 "--", "sleep", secs], env=env, stderr=subprocess.PIPE, text=True))
        pr = subprocess.run([probe, lib, secs, "1000", "10000"], env=env, capture_output=True, text=True)
        rows = []
        for iv, (store, p) in runs.items():
            _, err = p.communicate()
            if p.returncode:
                print(f"resolution: gpuscope at {iv} failed: {err.strip()[-300:]}")
                continue
            series = stored_series(gpuscope, store, "gpu.util_pct")
            if not series:
                print("resolution: gpuscope stored no gpu.util_pct: is the NVML collector built?")
                return
            per = [dips_shown(s) for _, s in sorted(series.items())]
            shown, total = sum(s for s, _ in per), sum(t for _, t in per)
            npts = sum(len(s) for s in series.values()) / len(series)
            rows.append((f"gpuscope --interval {iv} (driver sample buffer)", shown, total,
                         f"{npts / a.seconds:.1f} stored points/s per GPU"))
        print(f"{'series':<48}{'dips shown':>14}{'share':>9}")
        for name, shown, total, note in rows:
            print(f"{name:<48}{shown:>7} of {total:<4}{100 * shown / max(total, 1):>8.1f} %  {note}")
        if pr.returncode:
            print(f"resolution: probe failed: {pr.stderr.strip()}")
        for line in pr.stdout.splitlines():  # probe: interval 1000 ms: dips 30, shown min a mean b max c (p %) ...
            f = line.replace(",", "").split()
            iv = int(f[2])
            label = f"tracker polling instant util every {iv // 1000} s"
            print(f"{label:<48}{f[10]:>7} of {f[5]:<4}{f[13].strip('('):>8} %  mean over {f[-2]} phases "
                  f"(min {f[8]}, max {f[12]})")
    finally:
        for f in os.listdir(tmp):
            os.unlink(os.path.join(tmp, f))
        os.rmdir(tmp)


if __name__ == "__main__":
    main()
