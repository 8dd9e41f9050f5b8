"""Integration: `gpuscope report` on a run of more steps than the run view holds keeps its memory
bounded whatever the run's length (docs/reliability.md). A stored run of 2,000,000 steps (made by
bench/steps_gen through the store interface, as the agent stores the client's steps: 1 ms steps, a
third data wait, 32 samples each, a 300 ms stall after every 1,000th) is reported as text and JSON
under a peak-RSS bound that holding every step could not meet (2 M steps x 48 B is 96 MB for the
steps alone); the figures are the whole run's (step count, samples, samples/s), and the report and
the doctor's evidence (periodic_stall, healthy) say what comes from a sample; `serve`'s run list
shows the whole run's figures too."""
import http.client
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa: E402,F403

GEN = os.path.join(BUILD, "bench/steps_gen")
N = 2000000
STEP_S, STALL_S, STALL_EVERY = 0.001, 0.300, 1000
BOUND_KIB = 64 * 1024  # below N * 48 B of steps: a report that held every step would exceed it


def setup(sb):
    check(os.path.exists(GEN), f"{GEN} is not built")
    p = subprocess.run([GEN, "--url", sb.store, "--steps", str(N), "--step-ms", "1", "--stall-every",
                        str(STALL_EVERY), "--stall-ms", "300", "--name", "long"],
                       capture_output=True, text=True, timeout=600)
    check(p.returncode == 0, f"steps_gen failed: {p.stderr}")


box = shared_sandbox(setup)


def report(*args):
    """Runs `gpuscope report long ARGS`; returns (stdout, peak RSS in KiB) from the child's rusage."""
    sb = box()
    env = dict(sb.env)
    # In an ASan build (GS_SANITIZE) freed memory waits in a 256 MB quarantine, which would count as
    # the program's; without it the bound holds there too. Ignored by a build without ASan.
    env["ASAN_OPTIONS"] = ":".join(x for x in (env.get("ASAN_OPTIONS", ""), "quarantine_size_mb=0") if x)
    with open(os.path.join(sb.dir, "out"), "w+") as out:
        p = subprocess.Popen([BIN, "report", "long", *args], stdout=out, stderr=subprocess.PIPE, env=env)
        _, status, ru = os.wait4(p.pid, 0)
        err = p.stderr.read().decode()
        p.stderr.close()
        check(os.waitstatus_to_exitcode(status) == 0, f"report failed ({status}): {err}")
        out.seek(0)
        return out.read(), ru.ru_maxrss


# The whole run's figures: the first kept step (the warm-up one left out) ends at 2 ms, the last at
# N ms plus the stalls before it; throughput is over the span from the first kept step's start.
KEPT = N - 1
WALL = (N * STEP_S + (N // STALL_EVERY - 1) * STALL_S) - 2 * STEP_S + STEP_S


def test_report_json_is_bounded_and_has_the_whole_runs_figures():
    out, peak = report("--json")
    print(f"     report --json on {N} steps: peak RSS {peak} KiB (bound {BOUND_KIB})")
    check(peak < BOUND_KIB, f"report --json peaked at {peak} KiB, over {BOUND_KIB}")
    f = json.loads(out)["figures"]
    check(f["steps"] == KEPT, f"steps {f['steps']}")
    check(f["samples"] == 32 * KEPT, f"samples {f['samples']}")
    want = 32 * KEPT / WALL
    check(abs(f["samples_per_s"] - want) < 1e-6 * want, f"samples_per_s {f['samples_per_s']}, want {want}")
    check(abs(f["data_share"] - 1 / 3) < 1e-6, f"data_share {f['data_share']}")
    check(f["median_step_s"] == STEP_S, f"median_step_s {f['median_step_s']}")
    check(f["step_stretches"] == 64 and 0 < f["steps_held"] <= 262144, f"held {f['steps_held']} in {f['step_stretches']}")


def test_report_text_is_bounded_and_says_the_median_is_sampled():
    out, peak = report()
    print(f"     report on {N} steps: peak RSS {peak} KiB (bound {BOUND_KIB})")
    check(peak < BOUND_KIB, f"report peaked at {peak} KiB, over {BOUND_KIB}")
    check(f"{KEPT} steps," in out, out[:800])
    check(f"of the {KEPT} steps, in 64 stretches spread over the run" in out, out[:800])


def test_periodic_stalls_found_within_stretches_and_evidence_says_sampled():
    out, _ = report("--json", "--diagnose")
    stalls = [x for x in json.loads(out)["findings"] if x["rule"] == "periodic_stall"]
    check(len(stalls) == 1, f"periodic_stall findings: {stalls}")
    ev = stalls[0]["evidence"]
    # 1,000 steps of 1 ms then 300 ms: every 1.3 s, never a false stall across two stretches.
    check(abs(ev["period_s"] - 1.3) < 1e-6 and abs(ev["mean_stall_s"] - 0.3) < 1e-3, f"evidence {ev}")
    check(ev.get("steps_sampled", "").endswith(f"of {KEPT} steps in 64 stretches"), f"evidence {ev}")
    share = 0.3 / 1.3
    check(abs(stalls[0]["share"] - share) < 0.01, f"share {stalls[0]['share']}, want {share}")


def test_healthy_evidence_counts_every_step_and_says_sampled():
    sb = box()
    p = subprocess.run([GEN, "--url", sb.store, "--steps", "400000", "--data-share", "0.01", "--name", "calm"],
                       capture_output=True, text=True, timeout=600)
    check(p.returncode == 0, f"steps_gen failed: {p.stderr}")
    findings = sb.json("report", "calm", "--json")["findings"]
    check([x["rule"] for x in findings] == ["healthy"], f"findings {findings}")
    ev = findings[0]["evidence"]
    check(ev["steps"] == 399999, f"evidence {ev}")
    check(ev.get("steps_sampled", "").endswith("of 399999 steps in 64 stretches"), f"evidence {ev}")


def test_serve_lists_the_whole_runs_figures():
    sb = box()
    p = subprocess.Popen([BIN, "serve", "--listen", "127.0.0.1:0"], env=sb.env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        check("listening on http://127.0.0.1:" in line, f"serve printed {line!r}")
        c = http.client.HTTPConnection("127.0.0.1", int(line.rsplit(":", 1)[1].strip().strip("/")), timeout=60)
        c.request("GET", "/api/runs")
        r = c.getresponse()
        body = r.read()
        check(r.status == 200, f"/api/runs: {r.status} {body[:200]!r}")
        run = [x for x in json.loads(body)["runs"] if x["name"] == "long"][0]
        want = 32 * KEPT / WALL
        check(run["steps"] == KEPT, f"steps {run['steps']}")
        check(abs(run["samples_per_s"] - want) < 1e-6 * want, f"samples_per_s {run['samples_per_s']}, want {want}")
    finally:
        p.terminate()
        p.wait(timeout=30)


if __name__ == "__main__":
    run_tests(globals())
