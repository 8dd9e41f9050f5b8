"""Integration: the job's output on a PostgreSQL store (a real server, tests/pg/pgserver.py), as
test_joblog.py proves it on SQLite: the bytes of each stream come back unchanged from the server
(`gpuscope log --raw`), the bound holds there, and a run made while the server was down keeps its
output in the spool, which the next run that reaches the server replays with the rest — the same
bytes, once — and a job on a pseudo-terminal is unchanged at its terminal and on the server."""
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pg"))
from gstest import *  # noqa: E402,F401,F403
from pgserver import PgServer  # noqa: E402

NO_GPU = {"GPUSCOPE_NVML_LIB": "/nonexistent/libnvidia-ml.so.1"}
OUT = b"a\rb\x1b[31mred\x1b[0m \xff\x00 bytes\n"
ERR = b"Traceback (most recent call last):\n  File \"x\", line 1\nRuntimeError: CUDA out of memory\n"
JOB = ("import os, sys; open(sys.argv[1], 'w').write(os.environ['GPUSCOPE_RUN_ID']);"
       " sys.stdout.buffer.write(%r); sys.stdout.flush(); sys.stderr.buffer.write(%r); sys.stderr.flush()"
       % (OUT, ERR))

_pg, _boxes = [], []


def pg():
    if not _pg:
        _pg.append(PgServer())
    return _pg[0]


def sandbox(db):
    sb = Sandbox()
    sb.env = pg().env(sb.env)
    sb.env["GPUSCOPE_STORE"] = pg().url(db)
    sb.env["GPUSCOPE_SPOOL_DIR"] = os.path.join(sb.dir, "spool")
    sb.env.update(NO_GPU)
    _boxes.append(sb)
    return sb


def run_job(sb, *opts):
    idf = os.path.join(sb.dir, "id")
    p = subprocess.run([BIN, "run", "-q", *opts, "--", PYTHON, "-c", JOB, idf], capture_output=True, env=sb.env,
                       timeout=120)
    check(p.stdout == OUT and ERR in p.stderr, (p.stdout, p.stderr))  # with what gpuscope says of an outage
    with open(idf) as f:
        return f.read()


def log_raw(sb, ref, *args):
    p = subprocess.run([BIN, "log", "--raw", *args, ref], capture_output=True, env=sb.env, timeout=60)
    check(p.returncode == 0, f"log {args} exited {p.returncode}: {p.stderr!r}")
    return p.stdout


def test_output_comes_back_from_the_server_unchanged():
    sb = sandbox("joblog")
    ref = run_job(sb)
    check(log_raw(sb, ref, "--stream", "out") == OUT, log_raw(sb, ref, "--stream", "out"))
    check(log_raw(sb, ref, "--stream", "err") == ERR, log_raw(sb, ref, "--stream", "err"))
    ev = sb.json("show", ref, "--events", "--json")
    check([e["name"] for e in ev if e["kind"] == "log"] == ["traceback", "cuda_oom"] or
          sorted(e["name"] for e in ev if e["kind"] == "log") == ["cuda_oom", "traceback"], ev)
    check(pg().psql("SELECT count(*) FROM logs WHERE run_id = '%s'" % ref, "joblog") != "0")


def test_a_pseudo_terminal_job_is_unchanged_at_the_terminal_and_on_the_server():
    from test_joblog import PRINTER, in_pty
    sb = sandbox("joblog_pty")
    direct, rc0 = in_pty([PYTHON, "-c", PRINTER], sb.env)
    watched, rc1 = in_pty([BIN, "run", "-q", "--", PYTHON, "-c", PRINTER], sb.env)
    check(rc0 == 0 and rc1 == 0 and watched == direct, f"the terminal saw\n{watched!r}\nnot\n{direct!r}")
    ref = sb.json("runs", "--json")[0]["id"]
    check(sb.json("show", ref, "--params", "--json")["log.streams"] == "tty,tty")
    check(log_raw(sb, ref).replace(b"\n", b"\r\n") == direct, log_raw(sb, ref))


def test_a_run_while_the_server_is_down_keeps_its_output_through_the_spool():
    sb = sandbox("joblog_spool")
    run_job(sb)  # the database made, with its schema
    pg().stop()
    try:
        ref = run_job(sb)  # ends in the spool
        spool = os.path.join(sb.dir, "spool")
        check(any(f.startswith("spool-") for f in os.listdir(spool)), os.listdir(spool))
    finally:
        pg().start()
    run_job(sb)  # reaches the server: replays the spool left by the run before
    check(not [f for f in os.listdir(spool) if f.startswith("spool-")], os.listdir(spool))
    check(log_raw(sb, ref, "--stream", "out") == OUT, log_raw(sb, ref, "--stream", "out"))
    check(log_raw(sb, ref, "--stream", "err") == ERR, log_raw(sb, ref, "--stream", "err"))
    n = pg().psql("SELECT count(*), sum(length(data)) FROM logs WHERE run_id = '%s'" % ref, "joblog_spool")
    check(n.split("|")[1] == str(len(OUT) + len(ERR)), n)  # each byte once


HANG_JOB = r"""
import os, sys, time
print("before", flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.02)
for i in range(5000):
    print("line %d of the job's output while its store hangs" % i)
print("done", flush=True)
"""


def cluster_pids(server):
    """The server's processes: the postmaster and its children (the backends that hold our connections)."""
    with open(os.path.join(server.data, "postmaster.pid")) as f:
        master = int(f.readline())
    kids = subprocess.run(["ps", "-o", "pid=", "--ppid", str(master)], capture_output=True, text=True).stdout.split()
    return [master] + [int(k) for k in kids]


def signal_if_there(pid, sig):
    """A backend listed by ps may end (or be a zombie reaped) before the signal: that one needs none."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def test_a_hung_server_never_holds_the_jobs_output():
    # The server stops answering (SIGSTOP, a peer that hangs; the agent told to wait for it far longer
    # than this test) once the run is in it: the job's 5000 lines still reach its pipe at once, since
    # the pump passes them on before the writer, stuck on the server, sees them.
    sb = sandbox("joblog_hang")
    run_job(sb)  # the database made
    go = os.path.join(sb.dir, "go")
    env = dict(sb.env, GPUSCOPE_PG_TIMEOUT_MS="600000")
    p = subprocess.Popen([BIN, "run", "-q", "--", PYTHON, "-c", HANG_JOB, go], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env=env)
    stopped = []
    try:
        check(p.stdout.readline() == b"before\n")
        wait_until(lambda: pg().psql("SELECT count(*) FROM logs l JOIN runs r ON r.id = l.run_id"
                                     " WHERE r.status = 'running'", "joblog_hang") != "0", "the output reaches the server",
                   proc=p)
        stopped = cluster_pids(pg())
        for pid in stopped:
            signal_if_there(pid, signal.SIGSTOP)
        open(go, "w").close()
        lines = [p.stdout.readline() for _ in range(5001)]
        check(lines[-1] == b"done\n" and lines[4999].startswith(b"line 4999 "), lines[-2:])
        check(p.poll() is None, "the agent ended while its server hung (it should be waiting for it)")
    finally:
        for pid in stopped:
            signal_if_there(pid, signal.SIGCONT)
    check(p.wait(timeout=120) == 0)
    ref = sb.json("runs", "--json")[0]["id"]
    check(log_raw(sb, ref).endswith(b"done\n"), "the output, once the server answers again")


def test_the_bound_holds_on_the_server():
    sb = sandbox("joblog_bound")
    job = "import sys\nfor i in range(3000):\n    sys.stdout.write('%06d ' % i + 'y' * 200 + '\\n')\n"
    p = subprocess.run([BIN, "run", "-q", "--log-max", "64K", "--", PYTHON, "-c", job], capture_output=True,
                       env=sb.env, timeout=120)
    check(p.returncode == 0 and len(p.stdout) == 3000 * 208, (p.returncode, len(p.stdout), p.stderr))
    ref = sb.json("runs", "--json")[0]["id"]
    kept = log_raw(sb, ref)
    check(0 < len(kept) <= 65536 and p.stdout.endswith(kept), len(kept))


if __name__ == "__main__":
    import signal
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a ctest timeout still stops the server
    try:
        run_tests(globals())
    finally:
        for p in _pg:
            p.close()
        for b in _boxes:
            b.close()
