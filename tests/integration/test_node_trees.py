"""The node agent collects the CPU side of the processes that use a GPU: `gpuscope agent` watches a
simulated node whose GPUs list a real process the test starts (GPUSIM_JOBPID: a "training" process
with two busy loader workers, its name full of characters a label must escape) and a pid that no
longer exists. /metrics must carry that process's tree — 3 processes, CPU, RSS, R/S/D counts —
labelled with its pid and escaped name, one tree however many GPUs list it, nothing for the pid that
is gone, and no tree line once the process exits (while NVML, which the simulator keeps answering,
still lists the pid). `promtool check metrics` is clean on the scrape; `--record` stores the trees.
(test_node_trees_user.py: another user's process.)"""
import os
import signal
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from gstest import *  # noqa: E402,F401
from test_metrics import get, samples, stop, wait_for  # noqa: E402

SIM = os.path.join(BUILD, "tests/gpusim/libnvidia-ml.so.1")
PROMTOOL = os.environ.get("GS_PROMTOOL", "/usr/bin/promtool")
NAME = b'gs,"tr=ain'  # prctl(PR_SET_NAME): a comma and an '=' the sink's labels cannot hold, a quote
COMM = 'gs_\\"tr_ain'  # ... as the exposition writes it
TREE = ("gpuscope_tree_procs", "gpuscope_tree_cpu_ratio", "gpuscope_tree_rss_bytes", "gpuscope_tree_threads",
        "gpuscope_tree_running", "gpuscope_tree_sleeping", "gpuscope_tree_dstate")

# The GPU process: renames itself, forks two workers that spin, and waits for SIGTERM (then kills them).
_JOB = r"""
import ctypes, os, signal, sys, time
libc = ctypes.CDLL(None)
libc.prctl(15, sys.argv[1].encode(), 0, 0, 0)
kids = []
for _ in range(2):
    pid = os.fork()
    if pid == 0:
        libc.prctl(15, b"worker", 0, 0, 0)
        while True:
            pass
    kids.append(pid)
def end(*_):
    for k in kids:
        os.kill(k, signal.SIGKILL)
        os.waitpid(k, 0)
    sys.exit(0)
signal.signal(signal.SIGTERM, end)
print("ready", flush=True)
while True:
    time.sleep(1)
"""


def dead_pid():
    for pid in range(30000, 2, -1):
        if not os.path.exists(f"/proc/{pid}"):
            return pid
    raise AssertionError("no free pid")


def start_job(sb, preexec=None):
    script = os.path.join(sb.dir, "gpu_job.py")
    with open(script, "w") as f:
        f.write(_JOB)
    job = subprocess.Popen([PYTHON, script, NAME.decode()], stdout=subprocess.PIPE, text=True, preexec_fn=preexec)
    check(job.stdout.readline().strip() == "ready", "the job did not start")
    return job


def scenario(sb, gone):
    # Two GPUs both list the job (one tree, not two) and GPU 1 a process that is gone.
    path = os.path.join(sb.dir, "node2.scn")
    with open(path, "w") as f:
        f.write("driver 550.54.15\ndevice 0-1\n  name NVIDIA H200\n  memory 143771MiB\n"
                "  at 0 util=97 mem_used=20GiB power=400 procs=$JOBPID:8GiB:90\n"
                f"device 1\n  at 0 util=90 mem_used=21GiB power=380 procs=$JOBPID:8GiB:80,{gone}:1GiB:5\n")
    return path


def start_agent(sb, job, gone, *args, user=None):
    env = dict(sb.env, GPUSIM_SCENARIO=scenario(sb, gone), GPUSCOPE_NVML_LIB=SIM, GPUSIM_JOBPID=str(job.pid))
    p = subprocess.Popen([BIN, "agent", "--listen", "127.0.0.1:0", "--interval", "200ms", *args], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, user=user)
    line = p.stdout.readline()
    check(" metrics at http://" in line, f"no address line: {line!r}; {p.stderr.read() if p.poll() is not None else ''}")
    return p, line.strip().rsplit(" ", 1)[1]


def tree_of(body, pid):
    return {n: [(l, v) for l, v in samples(body, n) if l.get("pid") == str(pid)] for n in TREE}


_state = {}


def setup(sb):
    gone = dead_pid()
    job = start_job(sb)
    agent, url = start_agent(sb, job, gone, "--record", "--name", "node-trees")
    try:
        # CPU needs two readings, and the workers must be running: wait for a tree of 3 with CPU.
        _state["live"] = wait_for(lambda: (lambda b: b if (lambda t: t["gpuscope_tree_procs"] and t[
            "gpuscope_tree_procs"][0][1] == 3 and t["gpuscope_tree_cpu_ratio"])(tree_of(b, job.pid)) else None)(
            get(url)[1]), 60, "no tree of 3 processes with CPU for the GPU process")
        job.send_signal(signal.SIGTERM)
        job.wait(timeout=30)
        # The first scrape that counts the tree no more must have none of its lines (a stale line would
        # linger for the endpoint's 10 s of staleness).
        _state["after"] = wait_for(lambda: (lambda b: b if samples(b, "gpuscope_gpu_trees_watched") == [({}, 0.0)]
                                            else None)(get(url)[1]), 60, "the tree of a process that exited is still watched")
    finally:
        if job.poll() is None:
            job.kill()
        stop(agent)
    _state["pid"], _state["gone"] = job.pid, gone


sandbox = shared_sandbox(setup)


def test_tree_of_the_gpu_process_is_exported_with_its_labels():
    sandbox()
    t = tree_of(_state["live"], _state["pid"])
    for name in TREE:
        check(len(t[name]) == 1, f"{name}: {t[name]} (one tree, though two GPUs list the process)")
        check(t[name][0][0] == {"pid": str(_state["pid"]), "comm": COMM}, f"{name} labels: {t[name][0][0]}")
        check(f"# HELP {name} " in _state["live"] and f"# TYPE {name} gauge" in _state["live"], f"{name}: HELP/TYPE")
    check(t["gpuscope_tree_procs"][0][1] == 3, f"processes: {t['gpuscope_tree_procs']} (the job and 2 workers)")
    check(t["gpuscope_tree_threads"][0][1] >= 3, f"threads: {t['gpuscope_tree_threads']}")
    # two spinning workers: some CPU (how much is the machine's load), never more than the 2 cores
    check(0 < t["gpuscope_tree_cpu_ratio"][0][1] <= 2.5, f"CPU: {t['gpuscope_tree_cpu_ratio']} (2 spinning workers)")
    check(t["gpuscope_tree_rss_bytes"][0][1] > 1e6, f"RSS: {t['gpuscope_tree_rss_bytes']}")
    states = sum(t[n][0][1] for n in ("gpuscope_tree_running", "gpuscope_tree_sleeping", "gpuscope_tree_dstate"))
    check(t["gpuscope_tree_sleeping"][0][1] >= 1 and states <= 3, f"R/S/D: {[t[n] for n in TREE[4:]]}")
    watched = samples(_state["live"], "gpuscope_gpu_trees_watched")
    check(watched == [({}, 1.0)], f"gpu_trees_watched: {watched}")
    check(samples(_state["live"], "gpuscope_gpu_trees_unwatched") == [({}, 0.0)], "gpu_trees_unwatched")


def test_a_pid_that_is_gone_has_no_tree():
    sandbox()
    gone = str(_state["gone"])
    check(any(l.get("pid") == gone for l, _ in samples(_state["live"], "gpuscope_gpu_proc_mem_bytes")),
          "the simulated GPU does not list the gone pid")
    lines = [l for l in _state["live"].splitlines() if l.startswith("gpuscope_tree_") and f'pid="{gone}"' in l]
    check(not lines, f"lines for a process that does not exist: {lines}")


def test_tree_disappears_when_the_process_exits():
    sandbox()
    body, pid = _state["after"], str(_state["pid"])
    # NVML (the simulator) still lists the pid: the tree ended with the process, not by staleness.
    check(any(l.get("pid") == pid for l, _ in samples(body, "gpuscope_gpu_proc_mem_bytes")),
          "the simulated GPU stopped listing the process")
    check(not [l for l in body.splitlines() if l.startswith("gpuscope_tree_")], "tree lines after the exit")


def test_promtool_finds_no_format_error():
    sandbox()
    own = "\n".join(l for l in _state["live"].splitlines() if "DCGM_FI_" not in l) + "\n"
    p = subprocess.run([PROMTOOL, "check", "metrics"], input=own, capture_output=True, text=True)
    check(p.returncode == 0 and not (p.stdout + p.stderr).strip(), f"promtool: rc {p.returncode}\n{p.stdout}{p.stderr}")


def test_record_keeps_the_trees():
    sb = sandbox()
    series = sb.json("metrics", "node-trees", "--metric", "tree.*", "--json")
    labels = {s["labels"] for s in series if s["name"] == "tree.procs"}
    check(labels == {f"pid={_state['pid']},comm=gs_\"tr_ain"}, f"stored tree.procs labels: {labels}")
    procs = [s for s in series if s["name"] == "tree.procs"]
    check(procs[0]["count"] > 0, f"no stored samples: {procs}")


if __name__ == "__main__":
    run_tests(globals())
