"""The doctor as `gpuscope run` uses it: every run ends diagnosed (findings stored, so a report reads
them instead of diagnosing again), a job with nothing wrong is called healthy rather than given
invented work, every finding carries evidence as a JSON object and a fix, and the report's "fixing
all" comes from the step model the findings stored (docs/diagnosis.md, "The step model")."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from gstest import PYTHON, Sandbox, check, run_tests

SB = None


def sandbox():
    global SB
    if SB is None:
        SB = Sandbox()
    return SB


def test_a_quiet_job_is_healthy():
    sb = sandbox()
    rc, _, err = sb.gs("run", "--name", "nap", "--", "sleep", "1")
    check(rc == 0 and "diagnosis: Healthy" in err, err)
    rep = sb.json("report", "nap", "--json")
    check([f["rule"] for f in rep["findings"]] == ["healthy"], str(rep["findings"]))
    f = rep["findings"][0]
    check(f["severity"] == "info" and f["share"] == 0 and f["speedup"] == 1, str(f))
    check(rep["diagnosed_now"] is False, "gpuscope run stored the diagnosis")


def test_a_busy_cpu_job_is_healthy():
    sb = sandbox()
    sb.ok("run", "--quiet", "--name", "spin", "--", PYTHON, "-c",
          "import time\nt=time.monotonic()\nwhile time.monotonic()-t<2: pass")
    rep = sb.json("report", "spin", "--json")
    check([f["rule"] for f in rep["findings"]] == ["healthy"], str(rep["findings"]))
    check(rep["figures"]["job_cpu_pct"] is not None, str(rep["figures"]))  # how much depends on the neighbours


def test_findings_carry_evidence_and_fix():
    sb = sandbox()
    job = ("import os,socket,time\np=os.environ['GPUSCOPE_SOCKET']\ns=socket.socket(socket.AF_UNIX,socket.SOCK_DGRAM)\n"
           "for i in range(80):\n"
           "    t0=time.monotonic(); time.sleep(0.02); t1=time.monotonic()\n"
           "    while time.monotonic()-t1<0.005: pass\n"
           "    t2=time.monotonic()\n"
           "    s.sendto(f'gs1 step {i} data={t1-t0:.6f} compute={t2-t1:.6f} samples=8 t={t2:.6f}'.encode(),p)\n")
    sb.ok("run", "--quiet", "--name", "wait", "--", PYTHON, "-c", job, first=True)
    rep = sb.json("report", "wait", "--json")
    rules = [f["rule"] for f in rep["findings"]]
    check("healthy" not in rules and rules, str(rules))
    shares = [f["share"] for f in rep["findings"]]
    check(shares == sorted(shares, reverse=True), f"ranked by time lost: {shares}")
    for f in rep["findings"]:
        check(isinstance(f["evidence"], dict) and f["evidence"] and "PyTorch" in f["fix"], str(f)[:400])
        check(f["speedup"] >= 1 and 0 <= f["share"] <= 1 and f["severity"] in ("low", "medium", "high"), str(f))


def test_fixing_all_comes_from_the_stored_step_model():
    # CPU first (first=True, where ctest makes the cgroup): in a loaded make check, beside a CPU-first
    # test, the job's 0.3 s pauses were lost in its starved steps and periodic_stall did not fire
    sb = sandbox()
    # 25 ms steps, 20 ms of them waiting for data (a sleep: input_latency), and a 0.3 s pause every 20
    # steps (periodic_stall): two terms of one step time.
    job = ("import os,socket,time\np=os.environ['GPUSCOPE_SOCKET']\ns=socket.socket(socket.AF_UNIX,socket.SOCK_DGRAM)\n"
           "for i in range(100):\n"
           "    if i and i % 20 == 0: time.sleep(0.3)\n"
           "    t0=time.monotonic(); time.sleep(0.02); t1=time.monotonic()\n"
           "    while time.monotonic()-t1<0.005: pass\n"
           "    t2=time.monotonic()\n"
           "    s.sendto(f'gs1 step {i} data={t1-t0:.6f} compute={t2-t1:.6f} samples=8 t={t2:.6f}'.encode(),p)\n")
    sb.ok("run", "--quiet", "--name", "stalls", "--", PYTHON, "-c", job, first=True)
    rep = sb.json("report", "stalls", "--json")
    modelled = [f for f in rep["findings"] if "change" in f["evidence"]]
    rules = {f["rule"] for f in modelled}
    check("periodic_stall" in rules and rules & {"input_latency", "input_bound"},
          str([f["rule"] for f in rep["findings"]]))
    for f in modelled:
        m = f["evidence"].get("step_model")
        check(isinstance(m, dict) and m == modelled[0]["evidence"]["step_model"], f"one model: {f['evidence']}")
    c = rep["combined"]
    check(c is not None and c["findings"] == len(modelled), f"combined {c}")
    # at least the largest estimate; at most the findings' shares of T added up (no second counted twice)
    best = max(f["speedup"] for f in modelled)
    won = sum(1 - 1 / f["speedup"] for f in modelled)
    most = 1 / (1 - won) if won < 1 else float("inf")
    check(best * (1 - 1e-4) <= c["speedup"] <= most * (1 + 1e-4), f"combined {c['speedup']} not in [{best}, {most}]")
    text = sb.ok("report", "stalls")
    check(f"fixing all: ~{c['speedup']:.1f}x" in text, text[-800:])


if __name__ == "__main__":
    try:
        run_tests(globals())
    finally:
        if SB:
            SB.close()
