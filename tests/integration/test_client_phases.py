"""The Python client under the real `gpuscope run`: only the phases a step timed reach the store. A
loop without `gpuscope.phase("h2d")` must store no step.h2d_s points (not measured is not zero), while
its data wait, compute and total are stored; the same loop with an h2d phase stores h2d for every step."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa: E402,F403

CLIENT_ENV = {"PYTHONPATH": os.path.join(SRC, "clients", "python")}
STEPS = 5

JOB = r"""
import sys, time, gpuscope
with_h2d = sys.argv[1] == "h2d"
for batch in gpuscope.watch([[0, 0]] * %d):
    if with_h2d:
        with gpuscope.phase("h2d"):
            time.sleep(0.002)
    time.sleep(0.005)
""" % STEPS


def step_points(mode):
    """The points of each step.* series of a run of JOB in mode ("h2d" or "none"), by name."""
    sb = Sandbox()
    try:
        sb.ok("run", "--name", "ph", "--", PYTHON, "-c", JOB, mode, env=CLIENT_ENV)
        rows = sb.csv("show", "ph", "--metric", "step.*", "--csv")
        points = {}
        for r in rows:
            points.setdefault(r["name"], []).append(float(r["value"]))
        return points
    finally:
        sb.close()


def test_step_without_h2d_phase_stores_no_h2d():
    points = step_points("none")
    check(len(points.get("step.n", [])) == STEPS, f"want {STEPS} steps stored: {sorted(points)}")
    check(not points.get("step.h2d_s"), f"step.h2d_s stored without an h2d phase: {points.get('step.h2d_s')}")
    for name in ("step.data_s", "step.compute_s", "step.total_s"):
        check(len(points.get(name, [])) == STEPS, f"{name}: {points.get(name)}")


def test_step_with_h2d_phase_stores_h2d():
    points = step_points("h2d")
    h2d = points.get("step.h2d_s", [])
    check(len(h2d) == STEPS and all(v > 0.001 for v in h2d), f"step.h2d_s: {h2d}")


if __name__ == "__main__":
    run_tests(globals())
