#!/usr/bin/python3
"""bench/top_cost: the agent's cost while `gpuscope top` watches its run (issue 15).

Two agents watch 8 simulated H200s (tests/gpusim, busy8_h200) side by side, each with its own store:
`gpuscope run --interval 100ms -- sleep S`. One is watched by `gpuscope top` (in a 200x60 tmux
window, refreshing every second), the other by nobody. Both agents are measured over the same window
in CPU-seconds (cgroup accounting, as bench/overhead.py), so the machine's other work bills neither;
top's own CPU is measured too. top only reads the store (SQLite WAL), so the watched agent should
cost the same as the other.

Target: the watched agent within 10 % of the unwatched one.
usage: bench/top_cost.py [--build DIR] [--seconds 60]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as bl  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", help="CMake build folder (default $GS_BUILD_DIR or build/)")
    ap.add_argument("--seconds", type=float, default=60)
    a = ap.parse_args()
    build = bl.build_dir(a.build)
    gpuscope = bl.program(build, "gpuscope")
    sim = os.path.join(build, "tests/gpusim/libnvidia-ml.so.1")
    scn = os.path.join(bl.REPO, "tests/gpusim/scenarios/busy8_h200.scn")
    tmux = shutil.which("tmux")
    if not tmux or not os.path.exists(sim):
        sys.exit("top_cost: needs tmux (Debian tmux) and the simulated NVML library (build tests/gpusim)")
    secs = max(20.0, a.seconds)
    bl.Meter.use_launcher(build)
    tmp = tempfile.mkdtemp(prefix="gs-topcost-")
    sock = f"gs-topcost-{os.getpid()}"
    env = dict(os.environ, GPUSCOPE_NVML_LIB=sim, GPUSIM_SCENARIO=scn, LANG="C.UTF-8")
    print(f"top_cost: two agents on 8 simulated GPUs at 100ms for {secs:g} s, one watched by gpuscope top")
    print(f"machine:  {bl.machine_facts()}", flush=True)
    try:
        agents = {}
        for name in ("alone", "watched"):
            m = bl.Meter(name)
            err = open(os.path.join(tmp, name + ".err"), "w")
            m.popen([gpuscope, "run", "--quiet", "--interval", "100ms", "--store", f"sqlite://{tmp}/{name}.db",
                     "--", "sleep", f"{secs:g}"], env=env, stdout=err, stderr=err)
            agents[name] = m
        time.sleep(1.5)
        top_sh = os.path.join(tmp, "top.sh")
        with open(top_sh, "w") as f:
            f.write(f"#!/bin/sh\nexport LANG=C.UTF-8\necho $$ > {tmp}/top.pid\n"
                    f"exec '{gpuscope}' top --store 'sqlite://{tmp}/watched.db'\n")
        os.chmod(top_sh, 0o755)
        subprocess.run([tmux, "-L", sock, "new-session", "-d", "-x", "200", "-y", "60", top_sh], env=env, check=True)
        time.sleep(1.5)
        top_pid = int(open(os.path.join(tmp, "top.pid")).read())
        c1 = {n: m.cpu_s() for n, m in agents.items()}
        top1 = bl.tree_ticks(top_pid) / bl.TICK
        t1 = time.monotonic()
        time.sleep(max(5.0, secs - 6))
        c2 = {n: m.cpu_s() for n, m in agents.items()}
        top2 = bl.tree_ticks(top_pid) / bl.TICK
        t2 = time.monotonic()
        screen = subprocess.run([tmux, "-L", sock, "capture-pane", "-p"], capture_output=True, text=True).stdout
        subprocess.run([tmux, "-L", sock, "kill-server"], capture_output=True)
        for m in agents.values():
            m.wait()
        wall = t2 - t1
        d = {n: c2[n] - c1[n] for n in agents}
        print(f"meter:    {agents['alone'].kind}, window {wall:.1f} s")
        for n in agents:
            print(f"  agent {n:<8} {bl.per_hour(d[n], wall):7.2f} CPU-s/h")
        print(f"  gpuscope top   {bl.per_hour(top2 - top1, wall):7.2f} CPU-s/h (its own cost, /proc ticks)")
        ratio = d["watched"] / d["alone"] if d["alone"] > 0 else float("nan")
        print(f"  ratio          watched / alone = {ratio:.3f}x (target <= 1.10x: {'met' if ratio <= 1.10 else 'MISSED'})")
        if "GPU7" not in screen:
            print("  warning: top's screen did not show the GPUs:\n" + screen)
    finally:
        subprocess.run([tmux, "-L", sock, "kill-server"], capture_output=True)
        bl.Meter.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
