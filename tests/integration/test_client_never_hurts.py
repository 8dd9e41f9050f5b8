"""The client can never hurt the job: when the agent is killed (SIGKILL) mid-run the job keeps
running and exits 0; messages to a missing or full socket are dropped and counted, never raised, and
a full socket never blocks the job."""
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

# A job that reports steps, metrics and marks for a while, then writes "<steps> <dropped>" to argv[1].
JOB = r"""
import os, sys, time
import gpuscope
done, seconds = sys.argv[1], float(sys.argv[2])
open(done + ".pid", "w").write(f"{os.getpid()} {os.environ['GPUSCOPE_SOCKET']}")
t_end = time.monotonic() + seconds
n = 0
def batches():
    while time.monotonic() < t_end:
        time.sleep(0.002)
        yield [0] * 8
for b in gpuscope.watch(batches()):
    with gpuscope.phase("h2d"):
        pass
    gpuscope.log("x", n, n)
    if n % 50 == 0:
        gpuscope.mark("tick", n)
    n += 1
gpuscope.flush()
open(done, "w").write(f"{n} {gpuscope.dropped()}")
sys.exit(0)
"""

# Sends N messages, each flushed on its own datagram, then writes "<dropped> <seconds>" to argv[1].
FLOOD = r"""
import sys, time
import gpuscope
out, n = sys.argv[1], int(sys.argv[2])
t0 = time.monotonic()
for i in range(n):
    gpuscope.log("flood", i, i)
    gpuscope.flush()
open(out, "w").write(f"{gpuscope.dropped()} {time.monotonic() - t0}")
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
            agent = subprocess.Popen([BIN, "run", "--", PYTHON, job, done, "4"], stdout=out, stderr=out, env=env)
        deadline = time.monotonic() + 20
        while not os.path.exists(done + ".pid") and time.monotonic() < deadline:
            time.sleep(0.05)
        check(os.path.exists(done + ".pid"), "the job did not start")
        time.sleep(1.0)
        agent.send_signal(signal.SIGKILL)
        agent.wait()
        pid, sock = open(done + ".pid").read().split()
        pid = int(pid)
        _, status = os.waitpid(pid, 0)
        check(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"job ended with status {status:#x}")
        steps, dropped = map(int, open(done).read().split())
        print(f"     after the agent's SIGKILL the job ran on: {steps} steps, {dropped} messages dropped")
        check(steps > 100 and dropped > 0, f"steps {steps}, dropped {dropped}")
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
    dropped = int(open(out).read().split()[0])
    shutil.rmtree(d, ignore_errors=True)
    check(dropped == 300, f"dropped {dropped}, want 300")


def test_full_socket_drops_counts_and_never_blocks():
    d = tempfile.mkdtemp(prefix="gstest-")
    path = os.path.join(d, "sock")
    sink = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sink.bind(path)  # bound, never read while the job runs: its queue fills
    out = os.path.join(d, "out")
    try:
        p = subprocess.run([PYTHON, write(os.path.join(d, "flood.py"), FLOOD), out, "500"], capture_output=True,
                           text=True, timeout=60, env=dict(os.environ, PYTHONPATH=CLIENT, GPUSCOPE_SOCKET=path))
        check(p.returncode == 0, f"flood exited {p.returncode}: {p.stderr}")
        dropped, secs = open(out).read().split()
        dropped, secs = int(dropped), float(secs)
        sink.setblocking(False)
        got = 0
        while True:
            try:
                got += sink.recv(8192).count(b"\n") + 1
            except BlockingIOError:
                break
        print(f"     full socket: {got} delivered, {dropped} dropped, {secs * 1e3:.0f} ms for 500 sends")
        check(dropped > 0 and got + dropped == 500, f"delivered {got} + dropped {dropped} != 500")
        check(secs < 5, f"500 sends took {secs:.1f} s: the client blocked")
    finally:
        sink.close()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    run_tests(globals())
