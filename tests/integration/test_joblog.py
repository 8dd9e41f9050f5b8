"""Integration: the job's output under `gpuscope run` (docs/runs.md, "The job's output"). It reaches
its terminal or pipe byte for byte as without gpuscope — in a real pseudo-terminal (Python's pty
module: `\\r`, colours, isatty, the window size and its change) and in a pipe — and the store keeps
the same bytes per stream, which `gpuscope log` gives back (--stream, --grep, --follow); a job that
prints 64 MiB through --log-max 1M keeps the bound (the tail, the cut said), is not blocked (every
byte arrives) and the agent's peak RSS does not grow with it; a PyTorch job's CUDA out-of-memory
traceback becomes events at its time and the report's last lines; `attach` says why it keeps none.
The same on PostgreSQL is test_joblog_pg.py."""
import fcntl
import hashlib
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa: E402,F403

NO_GPU = {"GPUSCOPE_NVML_LIB": "/nonexistent/libnvidia-ml.so.1"}
OUT = b"a\rb\x1b[31mred\x1b[0m \xff\xfe not utf-8\n50%\r100%\n"
ERR = b"\x1b[1mwarning\x1b[0m on stderr\n"
# prints OUT on stdout and ERR on stderr, then what its streams are
PRINTER = ("import os, sys; o = sys.stdout.buffer; o.write(%r); o.flush(); sys.stderr.buffer.write(%r);"
           " sys.stderr.flush(); o.write(('tty %%s %%s %%s\\n' %% (os.isatty(1), os.isatty(2),"
           " tuple(os.get_terminal_size(1)) if os.isatty(1) else '-')).encode()); o.flush()" % (OUT, ERR))

_box = shared_sandbox()


def run_id(box):
    return box.json("runs", "--json")[0]["id"]


def params(box, ref):
    return box.json("show", ref, "--params", "--json")


def log_raw(box, ref, *args):
    """`gpuscope log --raw` as bytes (the binary's stdout is a pipe here: raw either way)."""
    p = subprocess.run([BIN, "log", "--raw", *args, ref], capture_output=True, env=box.env, timeout=60)
    check(p.returncode == 0, f"log {args} exited {p.returncode}: {p.stderr!r}")
    return p.stdout


def in_pty(argv, env, rows=33, cols=101, on_output=None):
    """Runs argv on a fresh pseudo-terminal of rows x cols; returns (everything it wrote, exit code).
    on_output(master_fd, text so far) is called after each read (it may resize the terminal)."""
    pid, fd = pty.fork()
    if pid == 0:
        fcntl.ioctl(1, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        os.execvpe(argv[0], argv, env)
    out = b""
    while True:
        r, _, _ = select.select([fd], [], [], 60)
        check(r, f"{argv[:3]}: no output in 60 s (a hang): {out!r}")
        try:
            d = os.read(fd, 65536)
        except OSError:  # EIO: every writer of the terminal is gone
            break
        if not d:
            break
        out += d
        if on_output:
            on_output(fd, out)
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return out, os.waitstatus_to_exitcode(status)


def test_pipe_output_is_unchanged_at_the_pipe_and_in_the_store():
    box = _box()
    p = subprocess.run([BIN, "run", "-q", "--", PYTHON, "-c", PRINTER], capture_output=True,
                       env={**box.env, **NO_GPU}, timeout=120)
    check(p.returncode == 0, p.stderr)
    check(p.stdout == OUT + b"tty False False -\n", f"stdout changed: {p.stdout!r}")
    check(p.stderr == ERR, f"stderr changed: {p.stderr!r}")
    ref = run_id(box)
    check(params(box, ref)["log.streams"] == "out,err", params(box, ref))
    check(log_raw(box, ref, "--stream", "out") == p.stdout, log_raw(box, ref, "--stream", "out"))
    check(log_raw(box, ref, "--stream", "err") == ERR, log_raw(box, ref, "--stream", "err"))
    both = log_raw(box, ref)
    check(sorted(both.splitlines()) == sorted((p.stdout + ERR).splitlines()), both)


def test_pty_output_is_unchanged_at_the_terminal_and_in_the_store():
    box = _box()
    env = {**box.env, **NO_GPU}
    direct, rc0 = in_pty([PYTHON, "-c", PRINTER], env)
    watched, rc1 = in_pty([BIN, "run", "-q", "--", PYTHON, "-c", PRINTER], env)
    check(rc0 == 0 and rc1 == 0, (rc0, rc1, watched))
    check(b"tty True True (101, 33)" in direct, direct)
    check(watched == direct, f"the terminal saw\n{watched!r}\nnot\n{direct!r}")
    ref = run_id(box)
    check(params(box, ref)["log.streams"] == "tty,tty", params(box, ref))
    # the store has what the job wrote; the terminal's own \n -> \r\n is the terminal's
    check(log_raw(box, ref).replace(b"\n", b"\r\n") == direct, log_raw(box, ref))
    p = subprocess.run([BIN, "log", "--stream", "err", ref], capture_output=True, env=box.env)
    check(p.returncode == 0 and b"one stream (tty)" in p.stderr and p.stdout.replace(b"\n", b"\r\n") == direct,
          p.stderr)


WINCH_JOB = r"""
import os, signal, sys
seen = []
def on(sig, frame):
    seen.append(os.get_terminal_size(1))
signal.signal(signal.SIGWINCH, on)
print("ready", tuple(os.get_terminal_size(1)), flush=True)
while not any(s.columns == 120 for s in seen):
    signal.pause()
print("resized", tuple(seen[-1]), flush=True)
"""


def test_a_resized_terminal_reaches_the_job():
    box = _box()
    state = {"done": False}

    def resize(fd, text):
        if b"ready" in text and not state["done"]:
            state["done"] = True
            fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))

    out, rc = in_pty([BIN, "run", "-q", "--", PYTHON, "-c", WINCH_JOB], {**box.env, **NO_GPU}, on_output=resize)
    check(rc == 0, out)
    check(b"ready (101, 33)" in out and b"resized (120, 40)" in out, out)


BIG_JOB = r"""
import sys
o = sys.stdout.buffer
line = b"x" * 1000
for i in range(%d):
    o.write(b"%%08d " %% i + line + b"\n")
o.flush()
"""


def agent_peak_rss_kib(box, lines, log_max):
    """Runs a job printing `lines` lines of 1010 bytes under the agent; returns (peak RSS of the agent
    in KiB, sha256 and length of what reached the agent's stdout)."""
    env = {**box.env, **NO_GPU}
    if "ASAN_OPTIONS" in env:  # make check's ASan pass: ASan keeps up to 256 MiB of freed memory (its
        # quarantine, to catch a use after free) in the RSS; a small one leaves the RSS the program's
        env["ASAN_OPTIONS"] = env["ASAN_OPTIONS"] + ":quarantine_size_mb=4"
    p = subprocess.Popen([BIN, "run", "-q", "--log-max", log_max, "--", PYTHON, "-c", BIG_JOB % lines],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    h, n = hashlib.sha256(), 0
    while True:
        d = p.stdout.read(1 << 20)
        if not d:
            break
        h.update(d)
        n += len(d)
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    check(p.returncode == 0, err)
    return ru.ru_maxrss, h.hexdigest(), n


def test_a_job_printing_64_mib_keeps_the_bound_the_tail_and_is_not_blocked():
    box = _box()
    lines = 64 * 1024 * 1024 // 1010
    small, _, _ = agent_peak_rss_kib(box, 1000, "1M")
    big, digest, n = agent_peak_rss_kib(box, lines, "1M")
    want = hashlib.sha256(b"".join(b"%08d " % i + b"x" * 1000 + b"\n" for i in range(lines)))
    check(n == lines * 1010 and digest == want.hexdigest(), f"the job's stdout arrived changed: {n} bytes")
    ref = run_id(box)
    par = params(box, ref)
    check(int(par["log.bytes"]) == n, par)
    kept = log_raw(box, ref)
    check(0 < len(kept) <= (1 << 20) and int(par["log.kept_bytes"]) == len(kept), (len(kept), par))
    check(kept[-1010:] == b"%08d " % (lines - 1) + b"x" * 1000 + b"\n", kept[-1010:])  # the tail, to the last line
    check(n - len(kept) > 0, par)
    p = subprocess.run([BIN, "log", ref], capture_output=True, env=box.env)
    check(b"were cut (--log-max)" in p.stderr, p.stderr)
    # the agent's memory does not follow the output: 64 MiB through it, its peak within 16 MiB of a
    # run printing 1 MB
    check(big - small < 16 * 1024, f"agent peak RSS {big} KiB printing 64 MiB, {small} KiB printing 1 MB")


OOM_JOB = r"""
import os, socket, sys, time
import torch
x = torch.ones(256, 256)
print("step 1 loss", float((x @ x).sum()), flush=True)
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.sendto(("gs1 mark before_oom 1 t=%.6f" % time.monotonic()).encode(), os.environ["GPUSCOPE_SOCKET"])
def allocate(n):
    raise RuntimeError("CUDA out of memory. Tried to allocate %d.00 GiB (GPU 0; 15.78 GiB total capacity)" % n)
def train():
    allocate(20)
train()
"""


def test_an_oom_traceback_becomes_events_at_its_time_and_the_report_shows_it():
    box = _box()
    script = os.path.join(box.dir, "oom_job.py")
    with open(script, "w") as f:
        f.write(OOM_JOB)
    rc, _, err = box.gs("run", "-q", "--", PYTHON, script, env=NO_GPU, timeout=300)
    check(rc == 1 and "RuntimeError: CUDA out of memory" in err, err)
    ref = run_id(box)
    ev = box.json("show", ref, "--events", "--json")
    mark = [e for e in ev if e["kind"] == "mark" and e["name"] == "before_oom"]
    tb = [e for e in ev if e["kind"] == "log" and e["name"] == "traceback"]
    oom = [e for e in ev if e["kind"] == "log" and e["name"] == "cuda_oom"]
    exits = [e for e in ev if e["kind"] == "proc_exit"]
    check(len(mark) == 1 and len(tb) == 1 and len(oom) == 1 and exits, ev)
    check(tb[0]["text"].startswith("Traceback (most recent call last):") and
          tb[0]["text"].endswith("RuntimeError: CUDA out of memory. Tried to allocate 20.00 GiB (GPU 0; 15.78 GiB"
                                 " total capacity)"), tb[0])
    check(oom[0]["text"].startswith("RuntimeError: CUDA out of memory"), oom[0])
    # at its time: after the job's mark sent just before it, before the job's exit
    check(mark[0]["t_s"] <= tb[0]["t_s"] <= oom[0]["t_s"] <= exits[-1]["t_s"], (mark, tb, oom, exits))
    text = box.ok("report", ref)
    check("last lines of its output" in text and "| RuntimeError: CUDA out of memory" in text, text)
    tail = box.json("report", ref, "--json")["log_tail"]
    check(tail and tail[-1].startswith("RuntimeError: CUDA out of memory"), tail)


def test_log_command_picks_lines_and_says_what_it_cannot():
    box = _box()
    rc, _, _ = box.gs("run", "-q", "--", "sh", "-c", "echo one; echo two; printf 'three \\033]0;t\\007\\n' >&2; exit 3",
                      env=NO_GPU)
    check(rc == 3)
    ref = run_id(box)
    check(box.ok("log", "--grep", "^t(wo|hree)", "--stream", "out", ref) == "two\n")
    rc, out, _ = box.gs("log", "--grep", "four", ref)
    check(rc == 1 and out == "", (rc, out))
    rc, _, err = box.gs("log", "--grep", "(", ref)
    check(rc == 2 and "not a regular expression" in err, err)
    rc, _, err = box.gs("log", "--stream", "both", ref)
    check(rc == 2, err)
    rc, _, err = box.gs("log", "no-such-run")
    check(rc == 2, err)
    times = box.ok("log", "--times", "--stream", "out", ref)
    check(re.fullmatch(r"\[ *\d+\.\d{3}s\] one\n\[ *\d+\.\d{3}s\] two\n", times), times)
    # the report of the failed run: its last lines, escaped for the terminal (no OSC title sequence)
    text = box.ok("report", ref)
    check("| three" in text and "\033]" not in text and "\007" not in text, text)
    box.ok("run", "-q", "--log-max", "0", "--", "echo", "hidden", env=NO_GPU)
    rc, _, err = box.gs("log", run_id(box))
    check(rc == 1 and "not kept" in err, err)
    rc, _, err = box.gs("run", "--log-max", "10", "--", "true")
    check(rc == 2 and "--log-max" in err, err)


NCCL_LINES = (
    "[rank1]:[E ProcessGroupNCCL.cpp:563] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9,"
    " OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.\n"
    "host:123:456 [0] NCCL INFO Bootstrap : Using eth0\n"
    "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1269, unhandled system error\n"
    "epoch 3 loss 0.25\n"
    "Killed\n")


def test_nccl_and_killed_lines_become_events_and_others_do_not():
    box = _box()
    path = os.path.join(box.dir, "nccl.txt")
    with open(path, "w") as f:
        f.write(NCCL_LINES)
    box.ok("run", "-q", "--", "cat", path, env=NO_GPU)
    ev = [(e["name"], e["text"]) for e in box.json("show", run_id(box), "--events", "--json") if e["kind"] == "log"]
    lines = NCCL_LINES.splitlines()
    check(ev == [("nccl_timeout", lines[0]), ("nccl_error", lines[2]), ("killed", "Killed")], ev)


FOLLOW_JOB = r"""
import os, sys, time
print("line 1", flush=True)
go = sys.argv[1]
while not os.path.exists(go):
    time.sleep(0.02)
print("line 2", flush=True)
"""


def test_follow_prints_a_live_run_until_it_ends():
    box = _box()
    go = os.path.join(box.dir, "go")
    job = subprocess.Popen([BIN, "run", "-q", "--", PYTHON, "-c", FOLLOW_JOB, go], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, env={**box.env, **NO_GPU})
    try:
        ref = wait_until(lambda: [r["id"] for r in box.json("runs", "--json") if r["status"] == "running"],
                         "the run is listed", proc=job)[0]
        f = subprocess.Popen([BIN, "log", "--follow", ref], stdout=subprocess.PIPE, text=True, env=box.env)
        got = []
        reader = threading.Thread(target=lambda: got.extend(f.stdout), daemon=True)
        reader.start()
        wait_until(lambda: "line 1\n" in got, "the follower printed line 1", proc=f)
        open(go, "w").close()
        check(job.wait(timeout=120) == 0, job.stderr.read())
        check(f.wait(timeout=120) == 0, "the follower did not end with the run")
        reader.join(timeout=60)
        check(got == ["line 1\n", "line 2\n"], got)
    finally:
        if job.poll() is None:
            job.kill(), job.wait()


HANG_JOB = r"""
import os, sys, time
open(sys.argv[1], "w").write(str(os.getpid()))
print("loading shard 7 of 9", flush=True)
print("RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error", file=sys.stderr, flush=True)
while True:
    time.sleep(1)
"""


def test_a_crashed_run_keeps_its_output_to_the_last_commit_and_the_report_shows_it():
    box = _box()
    pidf = os.path.join(box.dir, "hang.pid")
    agent = subprocess.Popen([BIN, "run", "-q", "--", PYTHON, "-c", HANG_JOB, pidf], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, env={**box.env, **NO_GPU})
    job = None
    try:
        job = int(wait_file(pidf, proc=agent))
        ref = wait_until(lambda: [r["id"] for r in box.json("runs", "--json") if r["status"] == "running"],
                         "the run is listed", proc=agent)[0]
        wait_until(lambda: "Bus error" in box.gs("log", ref)[1], "the output is committed", proc=agent)
        agent.kill()  # SIGKILL: no last flush, no run end
        agent.wait()
    finally:
        if agent.poll() is None:
            agent.kill(), agent.wait()
        if job:
            try:
                os.kill(job, signal.SIGKILL)
            except ProcessLookupError:
                pass
    text = box.ok("report", ref)
    check(" crashed" in text.splitlines()[0], text.splitlines()[0])
    check("| loading shard 7 of 9" in text and "| RuntimeError: DataLoader worker" in text, text)


def test_attach_says_why_it_keeps_no_output():
    box = _box()
    target = subprocess.Popen(["sleep", "60"])
    try:
        a = subprocess.Popen([BIN, "attach", str(target.pid)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env={**box.env, **NO_GPU})
        wait_until(lambda: box.gs("runs", "--json")[0] == 0 and box.json("runs", "--json"), "the run", proc=a)
        target.kill(), target.wait()
        _, err = a.communicate(timeout=120)
        check(a.returncode == 0 and "output is not kept" in err and "another process" in err, err)
    finally:
        if target.poll() is None:
            target.kill(), target.wait()
    rc, _, err = box.gs("log", run_id(box))
    check(rc == 1 and "not kept" in err, err)


def test_serve_answers_the_output_from_a_chunk_or_its_tail():
    from test_serve_api import Server
    box = _box()
    p = subprocess.run([BIN, "run", "-q", "--", "sh", "-c", "echo first; printf 'b\\033[1m\\377\\n' >&2"],
                       capture_output=True, env={**box.env, **NO_GPU}, timeout=120)
    check(p.returncode == 0, p.stderr)
    ref = run_id(box)
    srv = Server(box)
    try:
        a = srv.json(f"/api/runs/{ref}/log")
        check(a["streams"] == "out,err" and a["capture"] is True and a["bytes"] == a["kept_bytes"] == 13, a)
        check([(c["stream"], c["text"]) for c in a["chunks"]] == [("out", "first\n"), ("err", "b\x1b[1m\ufffd\n")], a)
        check(a["next"] == a["chunks"][-1]["seq"] + 1 and a["more"] is False, a)
        check(srv.json(f"/api/runs/{ref}/log?from={a['next']}")["chunks"] == [])
        check([c["stream"] for c in srv.json(f"/api/runs/{ref}/log?tail=1")["chunks"]] == ["err"])
        srv.json(f"/api/runs/{ref}/log?from=-1", status=400)
        srv.json(f"/api/runs/{ref}/log?tail=x", status=400)
        srv.json("/api/runs/no-such-run/log", status=404)
    finally:
        srv.stop()


if __name__ == "__main__":
    run_tests(globals())
