"""The Python client under the real `gpuscope run`, on a compute-bound PyTorch job
(examples/compute_bound.py: in-memory tensors, a large MLP): the stored steps must show almost no
time waiting for data, and the explicit h2d phase and the loss metric must be stored."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa: E402,F403

CLIENT_ENV = {"PYTHONPATH": os.path.join(SRC, "clients", "python")}


def test_compute_bound_job_shows_data_wait_under_a_tenth():
    sb = Sandbox()
    try:
        sb.ok("run", "--name", "cb", "--", PYTHON, os.path.join(SRC, "examples", "compute_bound.py"), "--steps",
              "12", "--seconds", "600", env=dict(CLIENT_ENV, OMP_NUM_THREADS="1"),
              timeout=600)  # 12 steps however slow the machine; the timeouts only bound a hang
        rows = sb.csv("show", "cb", "--metric", "step.*", "--csv")
        data = sum(float(r["value"]) for r in rows if r["name"] == "step.data_s")
        total = sum(float(r["value"]) for r in rows if r["name"] == "step.total_s")
        steps = sum(1 for r in rows if r["name"] == "step.n")
        share = data / total if total else float("nan")
        print(f"     compute-bound: {steps} steps, data-wait share {share:.1%}")
        check(steps == 12, f"{steps} steps stored of the job's 12")
        check(share < 0.10, f"data-wait share {share:.1%} should be < 10%")
        check(any(r["name"] == "step.h2d_s" for r in rows), "no step.h2d_s series")
        ts = [float(r["t_s"]) for r in rows if r["name"] == "step.n"]
        check(ts == sorted(ts) and len(set(ts)) == len(ts), "step times must move strictly forward")
        marks = sb.csv("show", "cb", "--events", "--csv")
        check(any(e["kind"] == "mark" and e["name"] == "epoch" for e in marks), "no epoch mark stored")
    finally:
        sb.close()


if __name__ == "__main__":
    run_tests(globals())
