"""`gpuscope tune` leaves nothing behind: a trial whose job ignores SIGTERM is killed after the grace
(--seconds, --steps and --budget all end and the table is printed), a daemon a trial leaves running
(double fork + setsid, ignoring SIGTERM too) is killed when the trial ends and named, and SIGTERM to
tune itself is reported as SIGTERM (exit 143), not as Ctrl-C. The job is a small gs1 client in the
standard library, so each case takes seconds."""
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import BIN, PYTHON, Sandbox, check, run_tests  # noqa: E402

# job.py MODE PIDFILE N: N steps of ~20 ms, reported over gs1. MODE ignore: SIGTERM ignored; daemon:
# first leave a daemon (double fork, setsid, SIGTERM ignored) whose pid goes to PIDFILE; plain: neither.
_JOB = r'''
import os, signal, socket, sys, time
mode, pidfile, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
if mode == "ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if mode == "daemon":
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            with open(pidfile + ".tmp", "w") as f:
                f.write(str(os.getpid()))
            os.rename(pidfile + ".tmp", pidfile)
            time.sleep(600)
        os._exit(0)
    os.wait()
    while not os.path.exists(pidfile):
        time.sleep(0.01)
path = os.environ.get("GPUSCOPE_SOCKET")
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
for i in range(n):
    t0 = time.monotonic(); time.sleep(0.02); t1 = time.monotonic()
    if path:
        s.sendto(f"gs1 step {i} data=0.001 compute={t1 - t0 - 0.001:.6f} samples=8 t={t1:.6f}".encode(), path)
'''


# SIGTERM ignored from the job's first instant (inherited through exec), so a stop that comes while
# Python is still starting on a loaded machine is ignored too.
IGNORING = ["sh", "-c", 'trap "" TERM; exec "$0" "$@"']


def job(sb):
    p = os.path.join(sb.dir, "job.py")
    with open(p, "w") as f:
        f.write(_JOB)
    return p


def tune(sb, *args, rc_want=0, timeout=90):
    try:
        rc, out, err = sb.gs("tune", *args, timeout=timeout)
    except subprocess.TimeoutExpired:
        check(False, f"tune did not end within {timeout} s: {args}")
    check(rc == rc_want or (rc_want is None and rc in (0, 1)),
          f"tune exited {rc}, want {rc_want}\nstdout:\n{out}\nstderr:\n{err}")
    return out, err


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_a_job_ignoring_sigterm_is_killed_after_the_grace_with_seconds_and_budget():
    sb = Sandbox()
    try:
        pf = os.path.join(sb.dir, "pid")
        out, err = tune(sb, "--name", "ign", "--seconds", "2", "--grace", "1s", "--warmup", "1", "--json",
                        "--param", "mode=ignore", "--", *IGNORING, PYTHON, job(sb), "{mode}", pf, "100000",
                        rc_want=None)
        t = json.loads(out)["trials"][0]
        check(t["exit_status"] == 137 and t["status"] in ("ok", "failed"), str(t))  # failed: too few steps
        check("ignored SIGTERM: killed after the 1.0 s grace" in (t["cleanup"] or ""), str(t))
        out, err = tune(sb, "--name", "bud", "--budget", "2s", "--grace", "1s", "--steps", "100000", "--warmup", "1",
                        "--param", "mode=ignore,plain", "--", *IGNORING, PYTHON, job(sb), "{mode}", pf, "100000",
                        rc_want=None)
        check(" 02 mode=plain" in out and "not_run" in out and "the budget ran out" in out, out)
        check("ignored SIGTERM" in out, out)
    finally:
        sb.close()


def test_a_job_ignoring_the_stop_after_its_steps_is_killed_after_the_grace():
    sb = Sandbox()
    try:
        out, err = tune(sb, "--name", "st", "--steps", "5", "--warmup", "1", "--grace", "1s", "--json",
                        "--param", "mode=ignore", "--", *IGNORING, PYTHON, job(sb), "{mode}", "-", "100000")
        t = json.loads(out)["trials"][0]
        check(t["status"] == "ok" and t["exit_status"] == 137 and t["steps_measured"] == 5, str(t))
        check("ignored SIGTERM" in (t["cleanup"] or ""), str(t))
        run = sb.json("report", "st/01", "--json")
        run = run.get("run", run)
        check(run["status"] == "killed", f"the trial's run is closed: {run['status']}")
    finally:
        sb.close()


def test_a_daemon_left_by_a_trial_is_killed_and_named():
    sb = Sandbox()
    pf = os.path.join(sb.dir, "daemon.pid")
    try:
        out, err = tune(sb, "--name", "dmn", "--steps", "4", "--warmup", "1", "--grace", "1s",
                        "--param", "mode=daemon", "--", PYTHON, job(sb), "{mode}", pf, "100000")
        pid = int(open(pf).read())
        check(not alive(pid), f"the daemon {pid} is still running after tune exited")
        check(f"killed 1 process the trial left running: python3 (pid {pid})" in out, out)
        check(f"(pid {pid})" in err, f"said as the trial ends too:\n{err}")
    finally:
        if os.path.exists(pf) and alive(int(open(pf).read())):
            os.kill(int(open(pf).read()), signal.SIGKILL)
        sb.close()


def test_sigterm_to_tune_is_reported_as_sigterm():
    sb = Sandbox()
    try:
        p = subprocess.Popen([BIN, "tune", "--name", "sig", "--seconds", "60", "--warmup", "1", "--json",
                              "--param", "mode=plain,ignore", "--", PYTHON, job(sb), "{mode}", "-", "100000"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=sb.env)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # wait until the first trial's run is in the store
            rc, runs, _ = sb.gs("runs")
            if "sig/01" in runs:
                break
            time.sleep(0.2)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
        check(p.returncode == 143, f"exit {p.returncode}\n{out}\n{err}")
        r = json.loads(out)
        first, second = r["trials"]
        check(r["interrupted"] is True and r["stopped_by"] == "SIGTERM", str(r))
        check(first["status"] == "interrupted" and first["reason"] == "stopped by SIGTERM to tune", str(first))
        check(second["status"] == "not_run" and second["reason"] == "the sweep was stopped by SIGTERM", str(second))
        check("Ctrl-C" not in out + err, out + err)
    finally:
        if p.poll() is None:
            p.kill()
        sb.close()


if __name__ == "__main__":
    run_tests(globals())
