"""Integration: `gpuscope attach PID` records a process gpuscope did not start — a real PyTorch
training job started on its own, whose client finds the attach socket by itself — until it exits or
gpuscope is told to stop; `gpuscope.start()` in a plain Python process does the same from inside.
The attached run is diagnosed like the same job under `gpuscope run`."""
import os
import signal
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa: E402,F403

CLIENT = os.path.join(SRC, "clients", "python")
INPUT_BOUND = os.path.join(SRC, "examples", "input_bound.py")
NO_GPU = {"GPUSCOPE_NVML_LIB": "/nonexistent/libnvidia-ml.so.1"}


def job_env(box, **extra):
    e = dict(box.env)
    e.update(NO_GPU)
    e.update({"PYTHONPATH": CLIENT, "OMP_NUM_THREADS": "1"})
    e.pop("GPUSCOPE_SOCKET", None)
    e.update(extra)
    return e


def attach_env(box, **extra):
    e = dict(NO_GPU)
    e.update(extra)
    return e


def series_of(box, ref):
    """(source, name, labels) -> samples, from `metrics`."""
    return {(m["source"], m["name"], m["labels"]): m["count"] for m in box.json("metrics", ref, "--json")}


def top_rule(box, ref):
    rep = box.json("report", ref, "--json")
    return rep["findings"][0]["rule"], rep


def wait_for(pred, what, timeout=60):
    """Waits for a state; the timeout only bounds a hang."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def has_imported_torch(pid):
    try:
        with open(f"/proc/{pid}/maps") as f:
            return "libtorch" in f.read()
    except OSError:
        return False


def committed(box, ref):
    """Samples of host.mem.used_bytes the store holds for run ref now (0 before it has any)."""
    rc, out, _ = box.gs("show", ref, "--metric", "host.mem.used_bytes", "--csv")
    return max(0, len(out.strip().splitlines()) - 1) if rc == 0 else 0


def test_attach_records_a_training_job_and_diagnoses_it_like_run():
    box = Sandbox()
    try:
        # 80 steps (a count: on a loaded machine the same run, only slower; 600 s bounds a hang)
        args = [PYTHON, INPUT_BOUND, "--steps", "80", "--seconds", "600", "--workers", "0"]
        job = subprocess.Popen(args, env=job_env(box), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        # the job is running (it has imported torch) before anyone attaches
        wait_for(lambda: has_imported_torch(job.pid) or job.poll() is not None, "the job to import torch")
        rc, out, err = box.gs("attach", "--name", "att", str(job.pid), env=attach_env(box), timeout=600)
        job_out = job.communicate(timeout=600)[0]
        check(rc == 0, f"attach exited {rc}: {err}")
        check(job.returncode == 0, f"the job ran on: {job_out}")
        p = box.json("show", "att", "--params", "--json")
        check(p.get("attached") == "1" and p.get("attached.pid") == str(job.pid), f"params {p}")
        check(p.get("attached.end") == "exited", f"ended by the job's exit: {p.get('attached.end')}")
        s = series_of(box, "att")
        check(s.get(("host", "host.cpu.busy_pct", "cpu=total"), 0) > 20, "host series")
        check(s.get(("proctree", "proc.cpu_pct", f"pid={job.pid}"), 0) > 20, f"the job's own process: {sorted(s)[:5]}")
        steps = s.get(("client", "step.total_s", ""), 0)
        check(steps > 20, f"the client found the attach socket and sent steps: {steps}")
        check(p.get("num_workers") == "0", "the loader's params came through the socket too")
        rule_att, rep = top_rule(box, "att")

        box.ok("run", "--quiet", "--name", "ran", "--", *args, env=job_env(box), timeout=600)
        rule_run, _ = top_rule(box, "ran")
        check(rule_att == rule_run == "input_bound", f"attach found {rule_att}, run found {rule_run}")
        runs = box.json("runs", "--json")
        att = next(r for r in runs if r["name"] == "att")
        check(att["status"] == "finished", f"an attached run that saw its process exit is finished: {att}")
    finally:
        box.close()


def test_the_c_client_finds_the_attach_socket():
    example = os.path.join(BUILD, "clients/c/gpuscope_example_c")
    check(os.access(example, os.X_OK), f"{example} is not built")
    box = Sandbox()
    try:
        e = job_env(box)
        job = subprocess.Popen([example, "1500"], env=e, stdout=subprocess.PIPE, text=True)
        time.sleep(0.5)
        rc, out, err = box.gs("attach", "--name", "c", str(job.pid), env=attach_env(box), timeout=120)
        job_out = job.communicate(timeout=60)[0]
        check(rc == 0 and job.returncode == 0, f"attach {rc} {err}; job {job.returncode} {job_out}")
        steps = series_of(box, "c").get(("client", "step.total_s", ""), 0)
        check(steps > 100, f"the C client's steps reached the attached agent: {steps}")
    finally:
        box.close()


def test_attach_stops_on_sigterm_and_leaves_the_process_alone():
    box = Sandbox()
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        xdg = os.path.join(box.dir, "run")
        os.mkdir(xdg, 0o700)
        e = dict(box.env)
        e.update(attach_env(box, XDG_RUNTIME_DIR=xdg))
        agent = subprocess.Popen([BIN, "attach", "--quiet", "--name", "stop", str(sleeper.pid)], env=e,
                                 stderr=subprocess.PIPE, text=True)
        sock = os.path.join(xdg, "gpuscope", f"{sleeper.pid}.sock")
        wait_for(lambda: os.path.exists(sock), "the attach socket")
        check(stat.S_ISSOCK(os.stat(sock).st_mode), "a socket")
        check(stat.S_IMODE(os.stat(sock).st_mode) == 0o600, "socket mode 0600")
        check(stat.S_IMODE(os.stat(os.path.dirname(sock)).st_mode) == 0o700, "directory mode 0700")
        # the agent is in its loop: it has committed samples of the attached run
        wait_for(lambda: committed(box, "stop") > 0 or agent.poll() is not None, "the attached run's first samples")
        agent.send_signal(signal.SIGTERM)
        err = agent.communicate(timeout=60)[1]
        check(agent.returncode == 0, f"attach exits 0 when told to stop: {agent.returncode} {err}")
        check(sleeper.poll() is None, "the watched process was not signalled")
        check(not os.path.exists(sock), "the socket is removed at the end")
        p = box.json("show", "stop", "--params", "--json")
        check(p.get("attached.end") == "interrupted", f"attached.end {p.get('attached.end')}")
        check(p.get("attached.socket") == sock, f"the socket path is kept: {p.get('attached.socket')}")
    finally:
        sleeper.kill()
        sleeper.wait()
        box.close()


def test_attach_refuses_what_it_cannot_watch():
    box = Sandbox()
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        dead = subprocess.Popen(["true"])
        dead.wait()
        rc, _, err = box.gs("attach", str(dead.pid), env=NO_GPU)
        check(rc == 2 and "no process" in err, f"a pid that is gone: {rc} {err}")
        for bad in ("abc", "0", "-5", ""):
            rc, _, err = box.gs("attach", bad, env=NO_GPU)
            check(rc == 2, f"'{bad}': {rc} {err}")
        rc, _, err = box.gs("attach", env=NO_GPU)
        check(rc == 2 and "PID" in err, f"no pid: {rc} {err}")
        xdg = os.path.join(box.dir, "run")
        os.mkdir(xdg, 0o700)
        first = subprocess.Popen([BIN, "attach", "--quiet", str(sleeper.pid)],
                                 env={**box.env, **NO_GPU, "XDG_RUNTIME_DIR": xdg})
        try:
            sock = os.path.join(xdg, "gpuscope", f"{sleeper.pid}.sock")
            wait_for(lambda: os.path.exists(sock) or first.poll() is not None, "the first agent's socket")
            rc, _, err = box.gs("attach", str(sleeper.pid), env={**NO_GPU, "XDG_RUNTIME_DIR": xdg})
            check(rc == 2 and "watched already" in err, f"a second agent on one process: {rc} {err}")
        finally:
            first.send_signal(signal.SIGINT)
            first.wait(timeout=60)
        runs = box.json("runs", "--json")
        check(len(runs) == 1, f"only the first attach made a run: {len(runs)}")
    finally:
        sleeper.kill()
        sleeper.wait()
        box.close()


def test_the_agent_is_never_part_of_the_job_it_watches():
    box = Sandbox()
    try:
        pidfile = os.path.join(box.dir, "agent.pid")
        # The shell starts the agent on itself: gpuscope is the watched process's child.
        script = f"'{BIN}' attach --quiet --name self $$ & echo $! > '{pidfile}'; sleep 2.5; echo done"
        p = subprocess.run(["sh", "-c", script], env={**box.env, **NO_GPU}, capture_output=True, text=True,
                           timeout=60)
        check(p.returncode == 0, p.stderr)
        agent_pid = int(open(pidfile).read())
        wait_for(lambda: box.json("runs", "--json")[0]["status"] != "running", "the run to end", timeout=60)
        pids = {k[2] for k in series_of(box, "self") if k[1] == "proc.cpu_pct"}
        check(pids, "the shell and its sleep were watched")
        check(f"pid={agent_pid}" not in pids, f"the agent {agent_pid} is not in the job: {pids}")
    finally:
        box.close()


def test_gpuscope_start_in_a_plain_python_process():
    box = Sandbox()
    try:
        script = os.path.join(box.dir, "plain.py")
        with open(script, "w") as f:
            f.write(f"""
import sys, time
sys.argv = [{INPUT_BOUND!r}, "--steps", "60", "--seconds", "600", "--workers", "0"]
import gpuscope
gpuscope.start(name="started")
sys.path.insert(0, {os.path.join(SRC, "examples")!r})
import runpy
runpy.run_path({INPUT_BOUND!r}, run_name="__main__")
gpuscope.stop()
print("stopped", flush=True)
""")
        e = job_env(box, GPUSCOPE_BIN=BIN)
        p = subprocess.run([PYTHON, script], env=e, capture_output=True, text=True, timeout=600)
        check(p.returncode == 0 and "stopped" in p.stdout, f"the script ran through: {p.stdout}\n{p.stderr}")
        pr = box.json("show", "started", "--params", "--json")
        check(pr.get("attached") == "1", f"an attached run: {pr}")
        s = series_of(box, "started")
        check(s.get(("client", "step.total_s", ""), 0) > 20, "steps reached the agent")
        check(s.get(("host", "host.cpu.busy_pct", "cpu=total"), 0) > 10, "host series")
        rule, _ = top_rule(box, "started")
        check(rule == "input_bound", f"the same finding as under gpuscope run: {rule}")
        pids = {k[2] for k in series_of(box, "started") if k[1] == "proc.cpu_pct"}
        check(len(pids) == 1, f"only the Python process is the job, not the agent it started: {pids}")

        # Without the binary: one warning, and the script runs on.
        e = job_env(box, GPUSCOPE_BIN="/nonexistent/gpuscope", PATH="/usr/bin:/bin")
        code = "import gpuscope; gpuscope.start(); gpuscope.start(); gpuscope.stop(); print('ran on')"
        p = subprocess.run([PYTHON, "-c", code], env=e, capture_output=True, text=True, timeout=60)
        check(p.returncode == 0 and "ran on" in p.stdout, f"{p.stdout} {p.stderr}")
        check(len(p.stderr.strip().splitlines()) == 1 and "not found" in p.stderr, f"warned once: {p.stderr!r}")
    finally:
        box.close()


if __name__ == "__main__":
    if subprocess.run([PYTHON, "-c", "import torch"], capture_output=True).returncode != 0:
        skip_script(f"{PYTHON} cannot import torch (Debian python3-torch)")
    run_tests(globals())
