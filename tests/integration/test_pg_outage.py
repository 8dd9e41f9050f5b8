"""The shared store on PostgreSQL, through the real binary against a real server (tests/pg/pgserver.py):
outages lose nothing (the server stopped and started twice during a run: every sample the job sent
is in the server once, the host series have no gap, the spool is gone), a run starts when the
server is down at its start, an agent SIGKILLed in an outage is replayed by the next run as crashed
with every sample its spool committed, once, a replay in pieces that the server refuses halfway
(for another cause than an outage) is said so, keeps the spool and resumes with nothing lost or
doubled, a version-2 store (a row per rollup bucket) reads and migrates to packed rollups, credentials come from the libpq password file and a password in a URL
is never printed, and a database of another application is refused and left as it was."""
import os
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "pg"))
from gstest import *  # noqa: E402,F401
from pgserver import PASSWORD, PgServer  # noqa: E402

# A job that sends `gs1 metric tick I` for I = 0..N-1, one every PERIOD seconds: the ground truth
# the store is counted against. With a third argument, each tick also sends a mark (an event) and
# two params, `pI` and `qI`.
TICK_JOB = r'''
import os, socket, sys, time
n, period, more = int(sys.argv[1]), float(sys.argv[2]), len(sys.argv) > 3
path = os.environ.get("GPUSCOPE_SOCKET")
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
t0 = time.monotonic()
for i in range(n):
    while time.monotonic() < t0 + i * period:
        time.sleep(0.002)
    if path:
        s.sendto(f"gs1 metric tick {i}".encode(), path)
        if more:
            s.sendto(f"gs1 mark tick {i}".encode(), path)
            s.sendto(f"gs1 param p{i} {i}".encode(), path)
            s.sendto(f"gs1 param q{i} {i}".encode(), path)
'''

# A job that sends `gs1 metric tick I` for I = 0, 1, ... one every PERIOD seconds until the file
# STOP exists, then writes how many it sent to STOP.count (the ground truth). Exits 3 after 300 s
# without STOP (a hang's bound, never reached by a passing test).
UNTIL_JOB = r'''
import os, socket, sys, time
period, stop = float(sys.argv[1]), sys.argv[2]
path = os.environ["GPUSCOPE_SOCKET"]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
t0 = time.monotonic()
i = 0
while not os.path.exists(stop):
    if time.monotonic() - t0 > 300:
        sys.exit(3)
    while time.monotonic() < t0 + i * period:
        time.sleep(0.002)
    s.sendto(f"gs1 metric tick {i}".encode(), path)
    i += 1
with open(stop + ".count", "w") as f:
    f.write(str(i))
'''

_pg = []


def pg():
    if not _pg:
        _pg.append(PgServer())
    return _pg[0]


def sandbox(db):
    sb = Sandbox()
    sb.env = pg().env(sb.env)
    sb.env["GPUSCOPE_STORE"] = pg().url(db)
    sb.env["GPUSCOPE_SPOOL_DIR"] = os.path.join(sb.dir, "spool")
    with open(os.path.join(sb.dir, "tick_job.py"), "w") as f:
        f.write(TICK_JOB)
    return sb


def tick_job(sb, n, period, marks=False):
    return [PYTHON, os.path.join(sb.dir, "tick_job.py"), str(n), str(period)] + (["marks"] if marks else [])


def tick_values(sb, run):
    rows = sb.csv("show", run, "--metric", "tick", "--csv")
    return [float(r["value"]) for r in rows]


def check_no_gap(sb, run, metric, interval_s):
    rows = sb.csv("show", run, "--metric", metric, "--csv")
    check(len(rows) > 10, f"{metric}: only {len(rows)} samples")
    ts = [float(r["t_s"]) for r in rows]
    gaps = [(a, b) for a, b in zip(ts, ts[1:]) if b - a > 1.5 * interval_s or b <= a]
    check(not gaps, f"{metric}: gaps or repeats in the stored ticks: {gaps[:5]}")


def spool_open(sb):
    """The agent's spool files now (a run's spool exists from the outage that opened it until the
    replay that emptied it)."""
    d = os.path.join(sb.dir, "spool")
    return [f for f in os.listdir(d) if f.startswith("spool-")] if os.path.isdir(d) else []


def test_two_outages_lose_no_sample_and_store_none_twice():
    # Driven by states, not a schedule: each outage starts once the server holds the job's ticks, is
    # seen when the agent opens its spool, and ends once the agent has replayed it (spool gone).
    sb = sandbox("outage")
    server = pg()
    stop = os.path.join(sb.dir, "stop")
    job = os.path.join(sb.dir, "until_job.py")
    with open(job, "w") as f:
        f.write(UNTIL_JOB)
    outf, errf = open(os.path.join(sb.dir, "out"), "w+"), open(os.path.join(sb.dir, "err"), "w+")  # files, not pipes
    agent = subprocess.Popen([BIN, "run", "--name", "outage", "--interval", "100ms", "--", PYTHON, job, "0.02", stop],
                             env=sb.env, stdout=outf, stderr=errf, text=True)
    try:
        def stored():  # the ticks the server holds now (0 before the run is there)
            rc, out, _ = sb.gs("show", "outage", "--metric", "tick", "--csv")
            return max(0, len(out.strip().splitlines()) - 1) if rc == 0 else 0

        for k in range(2):
            before = stored()
            wait_until(lambda: stored() > before, f"outage {k + 1}: new ticks in the server", proc=agent, every=0.2)
            server.stop()
            wait_until(lambda: spool_open(sb), f"outage {k + 1}: the agent did not open its spool", proc=agent)
            server.start()
            wait_until(lambda: not spool_open(sb), f"outage {k + 1}: the spool was not replayed", proc=agent)
        before = stored()
        wait_until(lambda: stored() > before, "new ticks in the server after the outages", proc=agent, every=0.2)
        open(stop, "w").close()
        rc = agent.wait(timeout=120)
        outf.seek(0), errf.seek(0)
        out, err = outf.read(), errf.read()
        check(rc == 0, f"run exited {rc}\n{err}")
        n = int(wait_file(stop + ".count", "the job did not count its ticks"))
        values = tick_values(sb, "outage")
        check(len(values) == n, f"{len(values)} tick samples stored, the job sent {n}")
        check(values == [float(i) for i in range(n)], "tick samples lost, repeated or out of order")
        check_no_gap(sb, "outage", "host.mem.available_bytes", 0.1)
        notes = sb.ok("show", "outage", "--notes")
        check("unreachable 2 times" in notes and "replayed, none lost" in notes, f"no outage note:\n{notes}")
        spool = os.path.join(sb.dir, "spool")
        left = os.listdir(spool) if os.path.isdir(spool) else []
        check(not left, f"the spool was not emptied after the replay: {left}")
        check(PASSWORD not in out + err + notes, "a password was printed")
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
        try:
            server.start()  # a failed wait may have left it stopped
        except RuntimeError:
            pass  # it is running: pg_ctl refuses a second start
        sb.close()


def test_server_down_at_the_start_still_records_the_run():
    sb = sandbox("late")
    server = pg()
    try:
        server.stop()
        started = []

        def restart():
            time.sleep(3)
            server.start()
            started.append(1)

        th = threading.Thread(target=restart)
        th.start()
        n = 300
        rc, out, err = sb.gs("run", "--name", "late", "--interval", "100ms", "--", *tick_job(sb, n, 0.02),
                             timeout=120)
        th.join()
        check(rc == 0, f"run exited {rc}\n{err}")
        values = tick_values(sb, "late")
        check(values == [float(i) for i in range(n)], f"{len(values)} of {n} tick samples, or out of order")
        runs = sb.json("runs", "--json")
        late = [r for r in runs if r.get("name") == "late"]
        check(len(late) == 1 and late[0].get("status") == "finished", f"the run is not recorded once: {late}")
    finally:
        if not started:
            server.start()
        sb.close()


def test_run_ended_in_an_outage_is_replayed_by_the_next_run():
    sb = sandbox("ended")
    server = pg()
    spool = os.path.join(sb.dir, "spool")
    try:
        server.stop()
        rc, out, err = sb.gs("run", "--name", "ended", "--interval", "100ms", "--", *tick_job(sb, 150, 0.02),
                             timeout=120)
        check(rc == 0, f"the job's status is not gpuscope's: {rc}\n{err}")
        check("kept whole in the local spool" in err, f"the agent does not say where the run is:\n{err}")
        left = os.listdir(spool)
        check(len([f for f in left if f.endswith(".db")]) == 1, f"no spool left: {left}")
    finally:
        server.start()
    try:
        sb.ok("run", "--name", "next", "--", "true")
        values = tick_values(sb, "ended")
        check(values == [float(i) for i in range(150)], f"{len(values)} of 150 tick samples after the replay")
        runs = {r["name"]: r for r in sb.json("runs", "--json")}
        check(runs["ended"]["status"] == "finished" and runs["ended"]["exit_code"] == 0, f"{runs.get('ended')}")
        check(not [f for f in os.listdir(spool) if f.endswith(".db")], f"spool kept: {os.listdir(spool)}")
    finally:
        sb.close()


def spool_files(spool):
    return [os.path.join(spool, f) for f in os.listdir(spool) if f.endswith(".db")] if os.path.isdir(spool) else []


def spool_ticks(sb, path):
    """The tick samples a spool file holds: it is an SQLite store, read as one."""
    rc, out, err = sb.gs("show", "--store", "sqlite://" + path, "last", "--metric", "tick", "--csv")
    if rc != 0:
        return []
    import csv, io
    return [float(r["value"]) for r in csv.DictReader(io.StringIO(out))]


def test_agent_killed_in_an_outage_is_replayed_as_crashed_by_the_next_run():
    sb = sandbox("killed")
    server = pg()
    spool = os.path.join(sb.dir, "spool")
    try:
        server.stop()
        p = subprocess.Popen([BIN, "run", "--quiet", "--name", "killed", "--interval", "100ms", "--",
                              *tick_job(sb, 100000, 0.02)], env=sb.env, start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        seen, deadline = 0, time.monotonic() + 60
        while seen < 100 and time.monotonic() < deadline:  # a few flushes are in the spool
            time.sleep(0.2)
            files = spool_files(spool)
            seen = len(spool_ticks(sb, files[0])) if files else 0
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        check(seen >= 100, f"the spool holds {seen} tick samples after 60 s")
        files = spool_files(spool)
        check(len(files) == 1, f"the killed agent left no spool: {files}")
        committed = spool_ticks(sb, files[0])  # what the spool committed before the kill: the truth
        check(len(committed) >= seen and committed == [float(i) for i in range(len(committed))],
              f"the spool's ticks are not 0..{len(committed) - 1}")
    finally:
        server.start()
    try:
        sb.ok("run", "--name", "next", "--", "true")
        values = tick_values(sb, "killed")
        check(values == committed, f"{len(values)} tick samples in the server, {len(committed)} in the spool")
        runs = [r for r in sb.json("runs", "--json") if r["name"] == "killed"]
        check(len(runs) == 1 and runs[0]["status"] == "crashed", f"the killed run is not one crashed run: {runs}")
        check(not spool_files(spool), f"spool kept after the replay: {os.listdir(spool)}")
    finally:
        sb.close()


def test_replay_in_pieces_refused_halfway_keeps_the_spool_and_resumes():
    # Pieces of 150 points (GPUSCOPE_SPOOL_PIECE_POINTS, for tests): the spool of a 3 s run at 100 ms
    # is some 15 of them. A trigger makes the server refuse the run's samples past 1.5 s, as a full
    # disk or a constraint would: the pieces before are in, the replay says the server's own reason
    # (not "unreachable") and keeps the spool; once the trigger is gone, the next run replays the
    # rest. Every tick arrives once.
    sb = sandbox("pieces")
    sb.env["GPUSCOPE_SPOOL_PIECE_POINTS"] = "150"
    server = pg()
    spool = os.path.join(sb.dir, "spool")
    n = 150
    try:
        server.stop()
        sb.ok("run", "--name", "cut", "--interval", "100ms", "--", *tick_job(sb, n, 0.02, marks=True))
        check(len(spool_files(spool)) == 1, f"no spool: {os.listdir(spool)}")
    finally:
        server.start()
    sb.ok("run", "--name", "first", "--", "true")  # replays "cut" in pieces, nothing refused
    values = tick_values(sb, "cut")
    check(values == [float(i) for i in range(n)], f"{len(values)} of {n} ticks after a replay in pieces, or doubled")
    # Events and params come in pieces of at most 150 too (one transaction each: rows of one xmin),
    # every mark and param once.
    for table, one, sent in (("events", "e.kind = 'mark'", n), ("params", "e.key ~ '^[pq][0-9]+$'", 2 * n)):
        run_rows = f"FROM {table} e JOIN runs r ON r.id = e.run_id WHERE r.name = 'cut'"
        got = server.psql(f"SELECT count(*) FILTER (WHERE {one}), count(DISTINCT e.xmin::text),"
                          f" (SELECT max(c) FROM (SELECT count(*) c {run_rows} GROUP BY e.xmin::text) x) {run_rows}",
                          db="pieces").split("|")
        check(got[0] == str(sent) and int(got[1]) >= 2 and int(got[2]) <= 150,
              f"{table}: {got[0]} of {sent} sent, in {got[1]} transactions of at most {got[2]} rows (pieces of 150)")
        print(f"     {table}: {got[0]} of {sent} sent, in {got[1]} transactions of at most {got[2]} rows")
    marks = server.psql("SELECT count(DISTINCT e.value) FROM events e JOIN runs r ON r.id = e.run_id"
                        " WHERE r.name = 'cut' AND e.kind = 'mark'", db="pieces")
    check(marks == str(n), f"{marks} distinct marks of {n}")
    check(not spool_files(spool), "a spool without a refusal was not deleted after its last piece")
    try:
        server.stop()
        sb.ok("run", "--name", "cut2", "--interval", "100ms", "--", *tick_job(sb, n, 0.02))
    finally:
        server.start()
    server.psql("CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
                " IF NEW.t1 > 1500000000 AND EXISTS (SELECT 1 FROM series s JOIN runs r ON r.id = s.run_id"
                " WHERE s.id = NEW.series_id AND r.name = 'cut2') THEN"
                " RAISE EXCEPTION 'no room left for series %', NEW.series_id; END IF; RETURN NEW; END $$;"
                " CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON open_chunks"
                " FOR EACH ROW EXECUTE FUNCTION refuse()", db="pieces")
    sb.ok("run", "--name", "second", "--", "true")
    notes = sb.ok("show", "second", "--notes")
    check("no room left for series" in notes and "unreachable" not in notes and "kept" in notes,
          f"the refused replay is not said by its cause:\n{notes}")
    check(len(spool_files(spool)) == 1, "the spool of a refused replay was not kept")
    partial = tick_values(sb, "cut2")
    check(0 < len(partial) < n and partial == [float(i) for i in range(len(partial))],
          f"the pieces before the refusal are not in, in order: {len(partial)} of {n}")
    server.psql("DROP TRIGGER refuse ON open_chunks", db="pieces")
    sb.ok("run", "--name", "third", "--", "true")
    values = tick_values(sb, "cut2")
    check(values == [float(i) for i in range(n)], f"after the resumed replay {len(values)} of {n} ticks, or doubled")
    check_no_gap(sb, "cut2", "host.mem.available_bytes", 0.1)
    check(not spool_files(spool), "the spool was kept after the resumed replay")
    sb.close()


def test_password_in_a_url_is_never_printed():
    sb = sandbox("pw")
    try:
        server = pg()
        url = f"postgresql://gpuscope:{PASSWORD}@127.0.0.1:{server.port}/pw"
        env = dict(sb.env)
        env.pop("PGPASSFILE")
        env["GPUSCOPE_STORE"] = url
        rc, out, err = sb.gs("run", "--name", "pw", "--", "true", env=env)
        check(rc == 0, f"run with a password in the URL exited {rc}: {err}")
        rc2, out2, err2 = sb.gs("runs", env=env)
        check(rc2 == 0 and "pw" in out2, f"runs: {rc2} {err2}")
        bad = f"postgresql://gpuscope:{PASSWORD}@127.0.0.1:{server.port}/nope"
        rc3, out3, err3 = sb.gs("runs", "--store", bad, env=env)
        check(rc3 != 0 and "nope" in err3, f"runs on a missing database: {rc3} {err3}")
        wrong = f"postgresql://gpuscope:{PASSWORD}x@127.0.0.1:{server.port}/pw"
        rc4, out4, err4 = sb.gs("runs", "--store", wrong, env=env)
        check(rc4 != 0, f"a wrong password was accepted: {out4}")
        rc6, out6, err6 = sb.gs("run", "--store", wrong, "--", "true", env=env)
        check(rc6 == 3 and "password authentication failed" in err6,
              f"run with a wrong password did not stop at once (exit 3): {rc6} {err6}")
        param = f"postgresql://gpuscope@127.0.0.1:{server.port}/nope?password={PASSWORD}&connect_timeout=5"
        rc5, out5, err5 = sb.gs("runs", "--store", param, env=env)
        check(rc5 != 0 and "password=***" in err5, f"runs with a password parameter: {rc5} {err5}")
        every = out + err + out2 + err2 + out3 + err3 + out4 + err4 + out5 + err5 + out6 + err6
        check(PASSWORD not in every, f"a password was printed:\n{every}")
    finally:
        sb.close()


def test_database_of_another_application_is_refused_and_kept():
    sb = sandbox("foreign")
    try:
        server = pg()
        server.psql("CREATE DATABASE foreign_app", db="postgres")
        server.psql("CREATE TABLE orders(id int); INSERT INTO orders VALUES (1)", db="foreign_app")
        rc, out, err = sb.gs("run", "--store", server.url("foreign_app"), "--", "true")
        check(rc != 0 and "another application" in err, f"run on a foreign database: {rc} {err}")
        tables = server.psql("SELECT string_agg(tablename, ',') FROM pg_tables WHERE schemaname = 'public'",
                             db="foreign_app")
        check(tables == "orders", f"the foreign database was written: {tables}")
        server.psql("CREATE DATABASE newer", db="postgres")
        server.psql("CREATE TABLE meta(key text PRIMARY KEY, value text);"
                    " INSERT INTO meta VALUES ('app', 'gpuscope'), ('schema_version', '99')", db="newer")
        rc, out, err = sb.gs("runs", "--store", server.url("newer"))
        check(rc != 0 and "upgrade gpuscope" in err, f"a newer schema was not refused: {rc} {err}")
    finally:
        sb.close()


def test_replay_refused_at_the_run_end_is_said_by_its_cause():
    # The server is back after an outage but refuses the run's samples (a trigger, as a full disk or
    # a constraint would): the run ends in its spool, and gpuscope says the server did not take it,
    # with the server's reason — not that it is unreachable. The next run, the trigger gone, brings
    # every tick in once.
    sb = sandbox("refused")
    server = pg()
    spool = os.path.join(sb.dir, "spool")
    sb.ok("run", "--name", "schema", "--", "true")
    server.psql("CREATE FUNCTION refuse_all() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
                " RAISE EXCEPTION 'disk full on the server (test)'; END $$;"
                " CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON open_chunks"
                " FOR EACH ROW EXECUTE FUNCTION refuse_all()", db="refused")
    log = []

    def outage():
        time.sleep(1.5)
        server.stop()
        time.sleep(2.5)
        server.start()
        log.append(1)

    th = threading.Thread(target=outage)
    th.start()
    try:
        rc, out, err = sb.gs("run", "--name", "refused", "--interval", "100ms", "--", *tick_job(sb, 400, 0.02),
                             timeout=120)
    finally:
        th.join()
        if not log:
            server.start()
    check(rc == 0, f"the job's status is not gpuscope's: {rc}\n{err}")
    check("kept whole in the local spool" in err and "because the server refused it" in err
          and "disk full on the server (test)" in err and "replays it" in err and "unreachable" not in err,
          f"the refusal is not said by its cause:\n{err}")
    # The summary reads the run where it is, the spool: ended, with its figures; one line says where
    # it is and why, none that the failed writes "lost nothing" (true only of the spool).
    check("(refused) — finished" in err and "(exit 0)" in err and "host CPU: mean" in err,
          f"the summary does not read the run from its spool:\n{err}")
    check(err.count("local spool") == 1 and "nothing was lost" not in err and "cannot close" not in err,
          f"the summary does not say in one line where the run is:\n{err}")
    print("     " + "\n     ".join(line for line in err.splitlines() if "local spool" in line or "refused) —" in line))
    check(len(spool_files(spool)) == 1, "the spool of a refused replay was not kept")
    server.psql("DROP TRIGGER refuse ON open_chunks", db="refused")
    sb.ok("run", "--name", "next", "--", "true")
    values = tick_values(sb, "refused")
    check(values == [float(i) for i in range(400)], f"{len(values)} of 400 ticks after the replay, or doubled")
    check(not spool_files(spool), "the spool was kept after its replay")
    sb.close()


def test_version_2_store_is_read_then_migrated_to_packed_rollups():
    # Version 2 kept a rollups row per bucket; version 3 packs them in rollup_blocks. A version-2
    # store (made here from a version-3 one, its rollups as version 2 kept them) is read as it is,
    # and `gpuscope migrate` packs its rows, drops the old table and moves the number.
    sb = sandbox("old")
    try:
        server = pg()
        sb.ok("run", "--name", "old", "--interval", "100ms", "--", *tick_job(sb, 100, 0.02))
        sid = server.psql("SELECT s.id FROM series s JOIN runs r ON r.id = s.run_id"
                          " WHERE r.name = 'old' AND s.name = 'tick'", db="old")
        server.psql("DROP TABLE rollup_blocks; CREATE TABLE rollups(series_id bigint, res_ns bigint, t bigint,"
                    " n integer, min double precision, max double precision, mean double precision,"
                    " PRIMARY KEY(series_id, res_ns, t));"
                    f" INSERT INTO rollups VALUES ({sid}, 10000000000, 0, 0, 0, 99, 49.5),"
                    f" ({sid}, 60000000000, 0, 0, 0, 99, 49.5);"
                    " UPDATE meta SET value = '2' WHERE key = 'schema_version'", db="old")
        check(tick_values(sb, "old") == [float(i) for i in range(100)], "a version-2 store does not read")
        check(server.psql("SELECT value FROM meta WHERE key = 'schema_version'", db="old") == "2",
              "a read migrated the store")
        out = sb.ok("migrate")
        check("from schema version 2 to 4" in out, f"migrate: {out}")  # 4: version 3 and the tables of SQLite's 3
        blocks = server.psql(f"SELECT string_agg(res_ns || ':' || n, ',' ORDER BY res_ns) FROM rollup_blocks"
                             f" WHERE series_id = {sid}", db="old")
        check(blocks == "10000000000:1,60000000000:1", f"the old rows were not packed: {blocks}")
        check(server.psql("SELECT to_regclass('rollups') IS NULL", db="old") == "t", "the old table was kept")
        check("already" in sb.ok("migrate"), "a second migrate did something")
        check(tick_values(sb, "old") == [float(i) for i in range(100)], "the migrated store does not read")
    finally:
        sb.close()


if __name__ == "__main__":
    import signal
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a ctest timeout still stops the servers
    try:
        run_tests(globals())
    finally:
        for p in _pg:
            p.close()
