"""Integration: one run, one set of step figures. `gpuscope serve`'s API (the run list, a run's page, the
comparison) and `gpuscope report --json` print the same step count, throughput, median step and phase
shares for the same run, over runs whose steps lack `data=` (a loop that times only its own phases) and
one whose steps mix both kinds: each phase's share is over the steps that reported that phase (a step
without `data=` is not a step without data wait), as the report and the doctor always computed it and
serve did not (it divided the data wait by every step's total). The jobs send fixed phase lengths, so
the shares are also checked against the figures the job sent."""
import json
import os
import subprocess
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa: E402,F403

# A job that sends fixed steps over gs1: "nodata" steps time only compute and a named phase; "mixed"
# steps alternate a step with data/h2d/compute and one with compute only, every step 50 ms in all.
_JOB = r'''
import os, socket, sys, time
mode, n = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
for i in range(n):
    if mode == "nodata":
        fields = "compute=0.040000 forward=0.010000"
    elif i % 2 == 0:
        fields = "data=0.020000 h2d=0.005000 compute=0.025000"
    else:
        fields = "compute=0.050000"
    s.sendto(f"gs1 step {i} {fields} samples=16 t={time.monotonic():.6f}".encode(), os.environ["GPUSCOPE_SOCKET"])
'''

FIGURES = ("steps", "samples_per_s", "median_step_s", "data_share", "h2d_share", "compute_share")


def setup(sb):
    job = os.path.join(sb.dir, "fixed_steps.py")
    with open(job, "w") as f:
        f.write(_JOB)
    for mode in ("nodata", "mixed"):
        sb.ok("run", "--quiet", "--name", mode, "--", PYTHON, job, mode, "21")


box = shared_sandbox(setup)
_server = []


def server_json(path):
    """GET path from one `gpuscope serve` on a free port over the sandbox's store."""
    if not _server:
        p = subprocess.Popen([BIN, "serve", "--listen", "127.0.0.1:0", "--quiet"], env=box().env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = p.stdout.readline()
        if "listening on http://127.0.0.1:" not in line:
            p.kill()
            raise AssertionError(f"serve printed {line!r}; stderr: {p.stderr.read()}")
        _server.append((p, int(line.rsplit(":", 1)[1].strip().strip("/"))))
    with urllib.request.urlopen(f"http://127.0.0.1:{_server[0][1]}{path}", timeout=30) as r:
        return json.loads(r.read())


def report_figures(name):
    return box().json("report", name, "--json")["figures"]


def serve_figures(name):
    """The step figures of run name as each of serve's answers shows them."""
    page = server_json(f"/api/runs/{name}")["steps"]
    row = next(r for r in server_json("/api/runs")["runs"] if r["name"] == name)
    cmp = server_json(f"/api/compare?runs={name},{name}")["runs"][0]
    return {"run page": {("steps" if k == "n" else k): v for k, v in page.items()},
            "run list": {k: row[k] for k in ("steps", "samples_per_s", "median_step_s", "data_share")},
            "compare": {k: cmp[k] for k in FIGURES}}


def same(a, b):
    return a == b or (a is not None and b is not None and abs(a - b) <= 1e-9 * max(1, abs(a)))


def check_serve_matches_report(name):
    want = report_figures(name)
    check(want["steps"] == 20, f"{name}: 21 steps sent, the warm-up left out: {want}")
    answers = serve_figures(name)
    check(len(answers) == 3 and all(answers.values()), f"{name}: every answer has figures: {answers}")
    for where, got in answers.items():
        for k, v in got.items():
            check(same(v, want[k]), f"{name}: {where}'s {k} is {v}, the report's {want[k]}")
    return want


def test_steps_without_data_show_the_same_figures_in_serve_and_report():
    f = check_serve_matches_report("nodata")
    check(f["data_share"] is None and f["h2d_share"] is None and f["compute_share"] is None,
          f"no step sent data= or h2d=: their shares are unknown, not 0: {f}")
    check(same(f["median_step_s"], 0.05), f"every step is 50 ms: {f}")


def test_mixed_steps_share_each_phase_over_the_steps_that_reported_it():
    f = check_serve_matches_report("mixed")
    # the steps with data= wait 20 of their 50 ms and copy for 5: 40 % and 10 %, whatever the others do
    check(same(f["data_share"], 0.4) and same(f["h2d_share"], 0.1) and same(f["compute_share"], 0.5),
          f"shares over the steps that reported each phase: {f}")


if __name__ == "__main__":
    try:
        run_tests(globals())
    finally:
        for p, _ in _server:
            p.terminate()
            p.wait(timeout=30)
