"""The store failing hard, through the real binary: a real PostgreSQL server (tests/pg/pgserver.py)
shut down without notice (pg_ctl -m immediate), reached through a fault-injecting TCP proxy
(faultproxy.py: connections dropped, reset, held without an answer, slowed), the agent's grants
revoked mid-run (the SQLite store on a disk full to the end: test_store_full_disk.py). Each
counts the job's numbered ticks in the store against what the job sent — none lost, none twice —
and checks the run's final status and exit code: the end of a run the store could not take is kept
beside the samples and read from there, never `crashed`."""
import json
import os
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "pg"))
from gstest import *  # noqa: E402,F401
from faultproxy import FaultProxy  # noqa: E402
from pgserver import PASSWORD, USER, PgServer  # noqa: E402

# `gs1 metric tick I` for I = 0..N-1, one every PERIOD seconds: the ground truth.
TICK_JOB = r'''
import os, socket, sys, time
n, period = int(sys.argv[1]), float(sys.argv[2])
path = os.environ.get("GPUSCOPE_SOCKET")
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
t0 = time.monotonic()
for i in range(n):
    while time.monotonic() < t0 + i * period:
        time.sleep(0.002)
    if path:
        s.sendto(f"gs1 metric tick {i}".encode(), path)
'''

_pg = []


def pg():
    if not _pg:
        _pg.append(PgServer())
    return _pg[0]


def sandbox(url):
    sb = Sandbox()
    sb.env = pg().env(sb.env)
    sb.env["GPUSCOPE_STORE"] = url
    sb.env["GPUSCOPE_SPOOL_DIR"] = os.path.join(sb.dir, "spool")
    with open(os.path.join(sb.dir, "tick_job.py"), "w") as f:
        f.write(TICK_JOB)
    return sb


def tick_job(sb, n, period=0.02):
    return [PYTHON, os.path.join(sb.dir, "tick_job.py"), str(n), str(period)]


def tick_values(sb, run):
    return [float(r["value"]) for r in sb.csv("show", run, "--metric", "tick", "--csv")]


def spool_files(sb):
    d = os.path.join(sb.dir, "spool")
    return [f for f in os.listdir(d) if f.endswith(".db")] if os.path.isdir(d) else []


def check_ticks(sb, run, n):
    values = tick_values(sb, run)
    lost = n - len(set(values))
    twice = len(values) - len(set(values))
    print(f"     {run}: {len(values)} tick samples of {n} sent, {lost} lost, {twice} twice")
    check(values == [float(i) for i in range(n)], f"{run}: {lost} ticks lost, {twice} twice, or out of order")


def check_no_gap(sb, run, metric, interval_s):
    rows = sb.csv("show", run, "--metric", metric, "--csv")
    ts = [float(r["t_s"]) for r in rows]
    check(len(ts) > 10, f"{metric}: only {len(ts)} samples")
    gaps = [(a, b) for a, b in zip(ts, ts[1:]) if b - a > 1.5 * interval_s or b <= a]
    check(not gaps, f"{metric}: gaps or repeats in the stored ticks (the sampling stalled?): {gaps[:5]}")


def run_status(sb, name):
    runs = [r for r in sb.json("runs", "--json") if r.get("name") == name]
    check(len(runs) == 1, f"run {name} is not recorded once: {runs}")
    return runs[0]["status"], runs[0]["exit_code"]


def check_finished(sb, name):
    st = run_status(sb, name)
    check(st == ("finished", 0), f"run {name} reads {st}, the job exited 0")


def at(schedule):
    """Runs each (seconds, fn) of schedule in a thread, at that time from now; returns the thread."""
    t0 = time.monotonic()

    def go():
        for t, fn in schedule:
            time.sleep(max(0.0, t0 + t - time.monotonic()))
            fn()

    th = threading.Thread(target=go)
    th.start()
    return th


def pg_immediate(server):
    server._run("pg_ctl", "-D", server.data, "-m", "immediate", "-w", "-t", "60", "stop")


def test_immediate_shutdown_loses_nothing_and_the_end_is_kept():
    # -m immediate: the server's processes quit without a goodbye (a crash, an OOM kill, a failover).
    # Down at 1.5 s, back at 3 s, down again at 4.5 s to the job's end: the run ends in its spool,
    # read from there (finished, exit 0); a reader sees it so before any replay; the next run
    # brings it all in once.
    server = pg()
    sb = sandbox(server.url("immediate"))
    try:
        th = at([(1.5, lambda: pg_immediate(server)), (3.0, server.start), (4.5, lambda: pg_immediate(server))])
        rc, out, err = sb.gs("run", "--name", "imm", "--interval", "100ms", "--", *tick_job(sb, 300), timeout=120)
        th.join()
        check(rc == 0, f"run exited {rc}, the job 0:\n{err}")
        check("kept whole in the local spool" in err and "the store did not keep" not in err,
              f"the run's end is not said to be kept:\n{err}")
        check("(imm) — finished" in err and "(exit 0)" in err, f"the summary is not the spool's:\n{err}")
        check(len(spool_files(sb)) == 1, f"no spool kept: {spool_files(sb)}")
        server.start()
        check(run_status(sb, "imm") == ("finished", 0), "a reader does not read the run's end beside its spool")
        sb.ok("run", "--name", "next", "--", "true")
        check_ticks(sb, "imm", 300)
        check_finished(sb, "imm")
        check_no_gap(sb, "imm", "host.mem.available_bytes", 0.1)
        check(not spool_files(sb), f"the spool was kept after its replay: {spool_files(sb)}")
        check(PASSWORD not in out + err, "a password was printed")
    finally:
        if not os.path.exists(os.path.join(server.data, "postmaster.pid")):
            server.start()
        sb.close()


def test_revoked_grants_spool_and_keep_the_spool():
    # The agent's role loses INSERT and UPDATE at 1.5 s of a 4 s run: the server refuses every write
    # (insufficient privilege) to the end. The run is kept whole in the spool, which says why; a
    # reader reads it as finished; with the grants back, the next run brings it in.
    server = pg()
    db = "revoked"
    server.psql(f"CREATE DATABASE {db}", db="postgres")
    server.psql(f"CREATE ROLE agent LOGIN PASSWORD '{PASSWORD}'", db="postgres")
    with open(server.passfile, "a") as f:
        f.write(f"127.0.0.1:{server.port}:*:agent:{PASSWORD}\n")
    sb = sandbox(server.url(db))
    sb.ok("run", "--name", "schema", "--", "true")  # the schema, made by its owner
    grants = ("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO agent;"
              " GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO agent")
    server.psql(grants, db=db)
    agent_url = f"postgresql://agent@127.0.0.1:{server.port}/{db}"
    sb.env["GPUSCOPE_STORE"] = agent_url
    try:
        th = at([(1.5, lambda: server.psql("REVOKE INSERT, UPDATE ON ALL TABLES IN SCHEMA public FROM agent", db=db))])
        rc, out, err = sb.gs("run", "--name", "rev", "--interval", "100ms", "--", *tick_job(sb, 200), timeout=120)
        th.join()
        check(rc == 0, f"run exited {rc}, the job 0:\n{err}")
        check("kept whole in the local spool" in err and "permission denied" in err
              and "the store did not keep" not in err, f"the refusal is not said with where the run is:\n{err}")
        check("(rev) — finished" in err and "(exit 0)" in err, f"the summary is not the spool's:\n{err}")
        check(len(spool_files(sb)) == 1, f"no spool kept: {spool_files(sb)}")
        check(run_status(sb, "rev") == ("finished", 0), "a reader does not read the run's end beside its spool")
        server.psql(grants, db=db)
        sb.ok("run", "--name", "next", "--", "true")
        check_ticks(sb, "rev", 200)
        check_finished(sb, "rev")
        check(not spool_files(sb), f"the spool was kept after its replay: {spool_files(sb)}")
    finally:
        sb.close()


def test_serve_comes_back_with_a_restarted_server():
    # A long-lived reader (serve) whose server is shut down without notice and started again
    # answers again once the server is back, without a restart of its own.
    import http.client
    server = pg()
    sb = sandbox(server.url("reader"))
    srv = None
    try:
        sb.ok("run", "--name", "kept", "--", "true")
        srv = subprocess.Popen([BIN, "serve", "--listen", "127.0.0.1:0"], env=sb.env, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
        port = int(srv.stdout.readline().rsplit(":", 1)[1].strip().strip("/"))

        def runs():
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            c.request("GET", "/api/runs")
            r = c.getresponse()
            body = r.read()
            c.close()
            return r.status, body

        check(runs()[0] == 200, "serve does not answer before the restart")
        pg_immediate(server)
        server.start()
        deadline, st = time.monotonic() + 30, None
        while time.monotonic() < deadline:  # bounds a hang only: it answers as soon as it reconnected
            st, body = runs()
            if st == 200:
                break
            time.sleep(0.2)
        check(st == 200 and b"kept" in body, f"serve does not come back with the server: {st} {body[:300]}")
    finally:
        if srv:
            srv.terminate()
            srv.wait()
        if not os.path.exists(os.path.join(server.data, "postmaster.pid")):
            server.start()
        sb.close()


def proxied(db):
    server = pg()
    server.psql(f"CREATE DATABASE {db}", db="postgres")
    proxy = FaultProxy(server.port)
    with open(server.passfile, "a") as f:  # the password file names the proxy's port too
        f.write(f"127.0.0.1:{proxy.port}:*:{USER}:{PASSWORD}\n")
    sb = sandbox(f"postgresql://{USER}@127.0.0.1:{proxy.port}/{db}")
    sb.env["GPUSCOPE_PG_TIMEOUT_MS"] = "1500"  # a server that does not answer is given up after 1.5 s
    return proxy, sb


def proxy_case(db, schedule, n=200):
    """A run of n ticks through the proxy, its modes changed on schedule [(s, mode)]: every tick
    once, finished, no spool left, the host series without a gap."""
    proxy, sb = proxied(db)
    try:
        th = at([(t, lambda m=m: proxy.set_mode(m)) for t, m in schedule])
        rc, out, err = sb.gs("run", "--name", db, "--interval", "100ms", "--", *tick_job(sb, n), timeout=120)
        th.join()
        check(rc == 0, f"run exited {rc}, the job 0:\n{err}")
        check_ticks(sb, db, n)
        check_finished(sb, db)
        check_no_gap(sb, db, "host.mem.available_bytes", 0.1)
        check(not spool_files(sb), f"the spool was kept: {spool_files(sb)}")
        return err
    finally:
        proxy.close()
        sb.close()


def test_connections_dropped_without_notice_lose_nothing():
    proxy_case("dropped", [(1.0, "drop"), (2.0, "drop")])


def test_connections_reset_lose_nothing():
    proxy_case("reset", [(1.0, "reset"), (2.0, "reset")])


def test_marks_taken_in_one_poll_are_all_kept():
    # 300 marks sent back to back: the agent drains several in one poll of the client socket and
    # stamps them with one time; each is kept (they differ by value), none twice.
    server = pg()
    sb = sandbox(server.url("marks"))
    try:
        job = "import os, socket; s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n" \
              "for i in range(300): s.sendto(f'gs1 mark burst {i}'.encode(), os.environ['GPUSCOPE_SOCKET'])"
        sb.ok("run", "--name", "marks", "--", PYTHON, "-c", job)
        got = server.psql("SELECT count(*), count(DISTINCT value), count(DISTINCT t) FROM events"
                          " WHERE kind = 'mark' AND name = 'burst'", db="marks").split("|")
        print(f"     300 marks sent: {got[0]} stored, {got[1]} distinct, at {got[2]} distinct times")
        check(got[0] == "300" and got[1] == "300", f"marks lost or doubled: {got[0]} stored, {got[1]} distinct of 300")
    finally:
        sb.close()


def test_node_agent_ticks_never_wait_for_a_hung_server():
    # `gpuscope agent --record` writes from a store thread of its own: a server that hangs from
    # 1 s to the agent's stop at 5 s (each write given up after 1.5 s, each reconnection after
    # connect_timeout) never delays a tick — the node run's host series has no gap — and the run,
    # ended in its spool, is brought in by the next run once the network heals.
    proxy, sb = proxied("nodehang")
    try:
        p = subprocess.Popen([BIN, "agent", "--record", "--name", "nodehang", "--interval", "100ms", "--listen",
                              "127.0.0.1:0", "--quiet"], env=sb.env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
        th = at([(1.0, lambda: proxy.set_mode("blackhole")), (5.0, lambda: p.send_signal(signal.SIGTERM))])
        try:
            _, err = p.communicate(timeout=120)
        finally:
            if p.poll() is None:  # it hung: nothing is left running
                p.kill()
                p.wait()
            th.join()
        check(p.returncode == 0, f"agent exited {p.returncode}:\n{err}")
        proxy.set_mode("drop")
        proxy.set_mode("pass")
        sb.ok("run", "--name", "next", "--", "true")
        check_no_gap(sb, "nodehang", "host.mem.available_bytes", 0.1)
        check(run_status(sb, "nodehang")[0] == "finished", f"the node run reads {run_status(sb, 'nodehang')}")
    finally:
        proxy.close()
        sb.close()


def test_slow_link_loses_nothing():
    proxy_case("slow", [(0.5, "slow")])


def test_server_that_hangs_never_stalls_sampling_and_the_run_ends():
    # A partition without RST from 1.5 s to the job's end: the sockets stay open and nothing
    # answers. The agent gives the server up (GPUSCOPE_PG_TIMEOUT_MS), spools, ends the run in the
    # spool and exits; the sampling tick never waited (no gap in the host series). Healed, the next
    # run brings the run in once.
    proxy, sb = proxied("hang")
    try:
        th = at([(1.5, lambda: proxy.set_mode("blackhole"))])
        rc, out, err = sb.gs("run", "--name", "hang", "--interval", "100ms", "--", *tick_job(sb, 200), timeout=120)
        th.join()
        check(rc == 0, f"run exited {rc}, the job 0:\n{err}")
        check("kept whole in the local spool" in err, f"the agent does not say where the run is:\n{err}")
        check(len(spool_files(sb)) == 1, f"no spool kept: {spool_files(sb)}")
        proxy.set_mode("drop")
        proxy.set_mode("pass")
        sb.ok("run", "--name", "next", "--", "true")
        check_ticks(sb, "hang", 200)
        check_finished(sb, "hang")
        check_no_gap(sb, "hang", "host.mem.available_bytes", 0.1)
        check(not spool_files(sb), f"the spool was kept after its replay: {spool_files(sb)}")
    finally:
        proxy.close()
        sb.close()


def test_unresolvable_host_at_the_start_is_said_at_once():
    # A host name that does not resolve (a typo, or DNS away) is an outage like a server down: the
    # run is spooled and gpuscope exits with the job's status — and says so on stderr before the
    # job runs, not only at the end.
    sb = sandbox("postgresql://gpuscope@no-such-host.invalid/db")
    try:
        rc, out, err = sb.gs("run", "--name", "dns", "--", PYTHON, "-c", "import sys; print('job ran', file=sys.stderr)")
        check(rc == 0, f"run exited {rc}, the job 0:\n{err}")
        first = err.splitlines()[0] if err else ""
        check("no-such-host.invalid" in first and "unreachable" in first and "local spool" in first,
              f"the unreachable store is not said first:\n{err}")
        check(err.index("unreachable") < err.index("job ran"), f"said only after the job:\n{err}")
        check(len(spool_files(sb)) == 1, f"no spool: {spool_files(sb)}")
    finally:
        sb.close()


if __name__ == "__main__":
    import signal
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a ctest timeout still stops the server
    try:
        run_tests(globals())
    finally:
        for p in _pg:
            p.close()
