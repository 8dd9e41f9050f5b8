"""`gpuscope tag`, `note`, `rename`, `rm` and `gc` through the binary, on SQLite and on a real
PostgreSQL server (tests/pg/pgserver.py): each test runs the same steps on both stores. `rm` leaves
no row of the run in any table (counted in the files and the server themselves, not through
gpuscope), shrinks the SQLite file, and refuses a running run; `gc` keeps what it is told to."""
import os
import sqlite3
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pg"))
from gstest import *  # noqa: E402,F401,F403
from pgserver import PgServer  # noqa: E402

_made = {}


def stores():
    """[(kind, sandbox, url)] for SQLite and PostgreSQL: one sandbox, one server for the script."""
    if not _made:
        pg = PgServer()
        _made["pg"] = pg
        sb = Sandbox()
        sb.env = pg.env(sb.env)
        sb.env["GPUSCOPE_SPOOL_DIR"] = os.path.join(sb.dir, "spool")
        _made["sb"] = sb
    sb = _made["sb"]
    return [("sqlite", sb, sb.store), ("pg", sb, _made["pg"].url("edits"))]


def run(sb, url, *args, job=("true",)):
    """A finished run in url; returns its id."""
    sb.ok("run", "--quiet", "--store", url, *args, "--", *job)
    return sb.json("runs", "--json", "--store", url)[0]["id"]


def row(sb, url, ref):
    for r in sb.json("runs", "--json", "--store", url):
        if r["id"] == ref or r["name"] == ref:
            return r
    return None


def rows_of(kind, sb, url, run_id):
    """{table: rows of run_id} over every table with a run_id or series_id column, read from the
    store itself."""
    out = {}
    if kind == "sqlite":
        db = sqlite3.connect(sb.db)
        tables = [t for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for t in tables:
            cols = [c[1] for c in db.execute(f'PRAGMA table_info("{t}")')]
            if "run_id" in cols:
                out[t] = db.execute(f'SELECT count(*) FROM "{t}" WHERE run_id = ?', (run_id,)).fetchone()[0]
            elif "series_id" in cols:
                out[t] = db.execute(f'SELECT count(*) FROM "{t}" WHERE series_id IN'
                                    f' (SELECT id FROM series WHERE run_id = ?)', (run_id,)).fetchone()[0]
        out["runs"] = db.execute("SELECT count(*) FROM runs WHERE id = ?", (run_id,)).fetchone()[0]
        db.close()
        return out
    pg = _made["pg"]
    db = url.rsplit("/", 1)[1]
    counts = [f"SELECT 'runs', count(*) FROM runs WHERE id = '{run_id}'"]
    for line in pg.psql("SELECT table_name, column_name FROM information_schema.columns WHERE table_schema ="
                        " current_schema() AND column_name IN ('run_id', 'series_id')", db).splitlines():
        t, c = line.split("|")
        where = "run_id = '%s'" % run_id if c == "run_id" else \
            "series_id IN (SELECT id FROM series WHERE run_id = '%s')" % run_id
        counts.append(f'SELECT \'{t}\', count(*) FROM "{t}" WHERE {where}')
    for line in pg.psql(" UNION ALL ".join(counts), db).splitlines():
        t, n = line.split("|")
        out[t] = out.get(t, 0) + int(n)
    return out


def test_tag_sets_replaces_and_removes_tags_and_their_params():
    for kind, sb, url in stores():
        rid = run(sb, url, "--tag", "team=nlp", "--tag", "owner=ann")
        out = sb.ok("tag", rid, "team=vision", "lr=3e-4", "--store", url)
        check(out.strip() == "owner=ann,team=vision,lr=3e-4", f"{kind}: tags printed {out!r}")
        check(row(sb, url, rid)["tags"] == "owner=ann,team=vision,lr=3e-4", f"{kind}: {row(sb, url, rid)}")
        params = sb.json("show", rid, "--params", "--json", "--store", url)
        check(params.get("tag.team") == "vision" and params.get("tag.lr") == "3e-4", f"{kind}: {params}")
        sb.ok("tag", rid, "--rm", "owner", "--rm", "lr", "--store", url)
        check(row(sb, url, rid)["tags"] == "team=vision", f"{kind}: {row(sb, url, rid)}")
        params = sb.json("show", rid, "--params", "--json", "--store", url)
        check("tag.owner" not in params and "tag.lr" not in params and params["tag.team"] == "vision",
              f"{kind}: {params}")


def test_a_bad_tag_is_a_usage_error_and_changes_nothing():
    for kind, sb, url in stores():
        rid = run(sb, url, "--tag", "team=nlp")
        for bad in (["novalue"], ["=v"], ["a,b=c"], ["k=a,b"], ["--rm", "x=y"], []):
            rc, out, err = sb.gs("tag", rid, *bad, "--store", url)
            check(rc == 2 and err.startswith("gpuscope: tag"), f"{kind}: tag {bad}: {rc} {err!r}")
        rc, _, err = sb.gs("tag", "no-such-run", "k=v", "--store", url)
        check(rc == 2 and "no-such-run" in err, f"{kind}: {rc} {err!r}")
        check(row(sb, url, rid)["tags"] == "team=nlp", f"{kind}: {row(sb, url, rid)}")


def test_a_note_and_a_new_name_stay_with_the_run():
    for kind, sb, url in stores():
        rid = run(sb, url, "--name", "before")
        sb.ok("note", rid, "loss diverged at step 40 \x1b[31m", "--store", url)
        notes = sb.json("show", rid, "--notes", "--json", "--store", url)
        check("loss diverged at step 40 \x1b[31m" in notes, f"{kind}: {notes}")
        check("\x1b" not in sb.ok("show", rid, "--notes", "--store", url), f"{kind}: a note escaped on a terminal")
        sb.ok("rename", "before", "after", "--store", url)
        check(row(sb, url, rid)["name"] == "after", f"{kind}: {row(sb, url, rid)}")
        check(sb.json("report", "after", "--json", "--store", url)["run"]["id"] == rid, kind)
        rc, _, err = sb.gs("rename", rid, "x" * 200, "--store", url)
        check(rc == 2 and "rename" in err, f"{kind}: {rc} {err!r}")


def test_rm_leaves_no_row_of_the_run_and_shrinks_the_sqlite_file():
    for kind, sb, url in stores():
        keep = run(sb, url, "--name", "keep")
        gone = run(sb, url, "--name", "gone", "--interval", "20ms", job=sb.step_job(0, 0.005, 12, "batch_size=8"))
        sb.ok("note", gone, "a note", "--store", url)
        sb.ok("report", gone, "--store", url)  # stores its findings
        before = rows_of(kind, sb, url, gone)
        for t in ("runs", "series", "chunks", "params", "notes", "findings"):
            check(before.get(t, 0) > 0, f"{kind}: the run has no {t} rows to remove: {before}")
        kept_before = rows_of(kind, sb, url, keep)
        size = os.path.getsize(sb.db)
        rc, out, err = sb.gs("rm", "gone", "--store", url, input="y\n")  # not a terminal: no question asked
        check(rc == 2 and "--yes" in err and rows_of(kind, sb, url, gone) == before, f"{kind}: {rc} {err!r}")
        out = sb.ok("rm", "gone", gone, "--yes", "--store", url)  # one run named twice: removed once
        check(out.count(gone) == 1, f"{kind}: {out!r}")
        after = rows_of(kind, sb, url, gone)
        check(after and not any(after.values()), f"{kind}: rows left after rm: {after}")
        check(rows_of(kind, sb, url, keep) == kept_before, f"{kind}: the other run lost rows")
        check(row(sb, url, gone) is None and row(sb, url, keep) is not None, kind)
        if kind == "sqlite":
            check(os.path.getsize(sb.db) < size, f"the store did not shrink: {size} -> {os.path.getsize(sb.db)}")


def test_rm_refuses_a_running_run_and_removes_nothing():
    for kind, sb, url in stores():
        done = run(sb, url, "--name", "done")
        stop = os.path.join(sb.dir, f"stop-{kind}")
        job = subprocess.Popen([BIN, "run", "--quiet", "--name", "live", "--store", url, "--", "sh", "-c",
                                f"while [ ! -e {stop} ]; do sleep 0.05; done"], env=sb.env)
        try:
            wait_until(lambda: (row(sb, url, "live") or {}).get("status") == "running", "the run to start", proc=job)
            rc, out, err = sb.gs("rm", "done", "live", "--yes", "--store", url)
            check(rc == 2 and "running" in err and "nothing removed" in err, f"{kind}: {rc} {out!r} {err!r}")
            check(row(sb, url, "done") is not None and row(sb, url, "live")["status"] == "running", kind)
        finally:
            open(stop, "w").close()
            job.wait(timeout=60)
        sb.ok("rm", "live", "--yes", "--store", url)
        check(row(sb, url, "live") is None, kind)


def test_gc_removes_ended_runs_older_than_the_age_and_keeps_tagged_ones():
    for kind, sb, url in stores():
        for r in sb.json("runs", "--json", "--store", url):  # earlier tests' runs
            sb.ok("rm", r["id"], "--yes", "--store", url)
        # a run that ended 100 days ago, written through the store interface (bench/serve_gen)
        old = subprocess.run([os.path.join(BUILD, "bench/serve_gen"), "--url", url, "--name", "old", "--hours", "0.01",
                              "--start", str(time.time() - 100 * 86400)], capture_output=True, text=True, env=sb.env,
                             timeout=120)
        check(old.returncode == 0, f"{kind}: serve_gen: {old.stderr}")
        old = old.stdout.strip()
        tagged = run(sb, url, "--tag", "keep=yes")
        plain = run(sb, url)
        out = sb.ok("gc", "--older-than", "90d", "--store", url)
        check(f"removed {old}" in out and "removed 1 of 3 runs" in out and row(sb, url, old) is None,
              f"{kind}: {out!r}")
        check(rows_of(kind, sb, url, old)["runs"] == 0 and not any(rows_of(kind, sb, url, old).values()), kind)
        out = sb.ok("gc", "--older-than", "0s", "--keep-tagged", "--dry-run", "--store", url)
        check(plain in out and tagged not in out and row(sb, url, plain), f"{kind}: {out!r}")
        out = sb.ok("gc", "--older-than", "0s", "--keep-tagged", "--store", url)
        check("removed 1 of 2 runs" in out and row(sb, url, plain) is None and row(sb, url, tagged), f"{kind}: {out}")
        sb.ok("gc", "--older-than", "0s", "--store", url)
        check(sb.json("runs", "--json", "--store", url) == [], kind)
        rc, _, err = sb.gs("gc", "--older-than", "soon", "--store", url)
        check(rc == 2 and "older-than" in err, f"{kind}: {rc} {err!r}")


def _close():
    if "pg" in _made:
        _made["pg"].close()
    if "sb" in _made:
        _made["sb"].close()


if __name__ == "__main__":
    try:
        run_tests(globals())
    finally:
        _close()
