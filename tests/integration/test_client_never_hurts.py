"""The client can never hurt the job: when the agent is killed (SIGKILL) mid-run the job keeps
running and exits 0; messages to a missing or full socket are dropped and counted, never raised, and
a full socket never blocks the job. All by counts and states, never by the clock: how long the sends
to a full socket take is a benchmark (bench/client_full_socket.py)."""
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa: E402,F403

CLIENT = os.path.join(SRC, "clients", "python")
# The client's own messages with its first send: where the run came from (python.executable,
# python.version; the flood imports no torch). Messages like any, dropped and counted like any.
ORIGIN = 2

# A job that reports steps, metrics and marks: it writes "<pid> <socket>" to argv[1].pid after its
# 50th step, keeps stepping until argv[1].killed exists (the agent is dead), takes 200 more steps,
# then writes "<steps after the kill> <dropped>" to argv[1]. Exits 3 if no kill comes in 120 s.
JOB = r"""
import os, sys, time
import gpuscope
done = sys.argv[1]
killed, deadline = done + ".killed", time.monotonic() + 120
state = {"n": 0, "after": None}
def batches():
    while state["after"] is None or state["after"] < 200:
        time.sleep(0.002)
        yield [0] * 8
for b in gpuscope.watch(batches()):
    n = state["n"]
    with gpuscope.phase("h2d"):
        pass
    gpuscope.log("x", n, n)
    if n % 50 == 0:
        gpuscope.mark("tick", n)
    if n == 50:
        with open(done + ".tmp", "w") as f:
            f.write(f"{os.getpid()} {os.environ['GPUSCOPE_SOCKET']}")
        os.rename(done + ".tmp", done + ".pid")
    if state["after"] is None and os.path.exists(killed):
        state["after"] = 0
    elif state["after"] is not None:
        state["after"] += 1
    elif time.monotonic() > deadline:
        sys.exit(3)
    state["n"] = n + 1
gpuscope.flush()
open(done, "w").write(f"{state['after']} {gpuscope.dropped()}")
sys.exit(0)
"""

# Sends N messages, each flushed on its own datagram, then writes "<dropped>" to argv[1].
FLOOD = r"""
import sys
import gpuscope
out, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    gpuscope.log("flood", i, i)
    gpuscope.flush()
open(out, "w").write(f"{gpuscope.dropped()}")
"""


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def test_job_survives_agent_sigkill_and_exits_0():
    sb = Sandbox()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: the orphaned job becomes our child
    try:
        job = write(os.path.join(sb.dir, "job.py"), JOB)
        done = os.path.join(sb.dir, "done")
        env = dict(sb.env, PYTHONPATH=CLIENT)
        with open(os.path.join(sb.dir, "out"), "w") as out:
            agent = subprocess.Popen([BIN, "run", "--", PYTHON, job, done], stdout=out, stderr=out, env=env)
        deadline = time.monotonic() + 120  # bounds a hang only: the job writes the file after 50 steps
        while not os.path.exists(done + ".pid") and agent.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        check(os.path.exists(done + ".pid"), f"the job did not reach its 50th step (agent: {agent.poll()})")
        agent.send_signal(signal.SIGKILL)
        agent.wait()
        open(done + ".killed", "w").close()
        pid, sock = open(done + ".pid").read().split()
        pid = int(pid)
        _, status = os.waitpid(pid, 0)
        check(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"job ended with status {status:#x}")
        steps, dropped = map(int, open(done).read().split())
        print(f"     after the agent's SIGKILL the job ran on: {steps} steps, {dropped} messages dropped")
        check(steps == 200 and dropped > 0, f"steps after the kill {steps} (want 200), dropped {dropped}")
        # A killed agent cannot remove its socket directory: do it for it.
        if os.path.basename(os.path.dirname(sock)).startswith("gpuscope-"):
            shutil.rmtree(os.path.dirname(sock), ignore_errors=True)
    finally:
        libc.prctl(36, 0, 0, 0, 0)
        sb.close()


def test_missing_socket_drops_and_counts_every_message():
    d = tempfile.mkdtemp(prefix="gstest-")
    out = os.path.join(d, "out")
    p = subprocess.run([PYTHON, write(os.path.join(d, "flood.py"), FLOOD), out, "300"], capture_output=True,
                       text=True, timeout=60, env=dict(os.environ, PYTHONPATH=CLIENT,
                                                       GPUSCOPE_SOCKET=os.path.join(d, "no-such-socket")))
    check(p.returncode == 0, f"flood exited {p.returncode}: {p.stderr}")
    dropped = int(open(out).read())
    shutil.rmtree(d, ignore_errors=True)
    check(dropped == 300 + ORIGIN, f"dropped {dropped}, want 300 + {ORIGIN}")


def test_full_socket_drops_counts_and_never_blocks():
    d = tempfile.mkdtemp(prefix="gstest-")
    path = os.path.join(d, "sock")
    sink = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sink.bind(path)  # bound, never read while the job runs: its queue fills
    out = os.path.join(d, "out")
    try:
        # Nothing reads the socket until the flood has ended: a send that blocked would wait forever,
        # so the flood ending at all (the timeout only bounds that hang) is the proof.
        try:
            p = subprocess.run([PYTHON, write(os.path.join(d, "flood.py"), FLOOD), out, "500"], capture_output=True,
                               text=True, timeout=120, env=dict(os.environ, PYTHONPATH=CLIENT, GPUSCOPE_SOCKET=path))
        except subprocess.TimeoutExpired:
            raise AssertionError("the client blocked on a full socket: 500 sends did not end in 120 s")
        check(p.returncode == 0, f"flood exited {p.returncode}: {p.stderr}")
        dropped = int(open(out).read())
        sink.setblocking(False)
        got = 0
        while True:
            try:
                got += sink.recv(8192).count(b"\n") + 1
            except BlockingIOError:
                break
        print(f"     full socket: {got} delivered, {dropped} dropped of 500 sends and {ORIGIN} of the client's own")
        check(dropped > 0 and got + dropped == 500 + ORIGIN, f"delivered {got} + dropped {dropped} != 500 + {ORIGIN}")
    finally:
        sink.close()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    run_tests(globals())
