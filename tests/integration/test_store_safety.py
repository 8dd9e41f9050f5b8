"""The store as a hostile user finds it, through the real binary: a read never modifies a file
that is not ours (hashed before and after every read command), never creates a file or a folder,
reads a store on a read-only folder, says what a folder is; only `run` and `migrate` migrate; and a
full disk (a file size limit, RLIMIT_FSIZE with SIGXFSZ ignored) during a run loses no samples,
names its cause, and the run still ends with its exit code."""
import hashlib
import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from gstest import BIN, Sandbox, check, run_tests

READS = [["runs"], ["runs", "--json"], ["show", "last"], ["metrics", "last"], ["report", "last"],
         ["report", "last", "--json"], ["compare", "last", "last"]]


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def listing(d):
    return sorted(os.listdir(d))


def one_line_error(rc, err, code=3):
    lines = err.strip().splitlines()
    return rc == code and len(lines) == 1 and lines[0].startswith("gpuscope: ")


def foreign_db(path, app=None):
    """Another application's database whose meta table looks like ours (schema_version 1)."""
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT)")
    db.execute("INSERT INTO meta VALUES('schema_version', '1')")
    if app:
        db.execute("INSERT INTO meta VALUES('app', ?)", (app,))
    db.execute("CREATE TABLE runs(id TEXT)")
    db.commit()
    db.close()


def test_reads_never_touch_a_foreign_database():
    sb = Sandbox()
    for app in (None, "notes"):
        path = os.path.join(sb.dir, f"foreign-{app}.db")
        foreign_db(path, app)
        before, files = digest(path), listing(sb.dir)
        for cmd in READS + [["migrate"], ["run", "--", "true"]]:
            rc, _, err = sb.gs(*cmd, "--store", "sqlite://" + path) if cmd[0] != "run" else \
                sb.gs("run", "--store", "sqlite://" + path, "--", "true")
            check(one_line_error(rc, err) and "not a gpuscope store" in err, f"{cmd}: rc {rc} {err!r}")
            check(digest(path) == before, f"{cmd} modified another application's database")
            check(listing(sb.dir) == files, f"{cmd} left files beside it: {listing(sb.dir)}")
        db = sqlite3.connect(path)
        check(db.execute("PRAGMA journal_mode").fetchone()[0] == "delete", "journal mode changed")
        check(db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == "1")
        db.close()
    sb.close()


def test_reads_of_a_missing_store_create_nothing():
    sb = Sandbox()
    for url in ("typo.db", "no/such/dir/typo.db"):
        path = os.path.join(sb.dir, url)
        for cmd in READS + [["migrate"]]:
            rc, out, err = sb.gs(*cmd, "--store", "sqlite://" + path)
            check(one_line_error(rc, err) and "no store at" in err and not out, f"{cmd}: rc {rc} {err!r}")
            check(not os.path.exists(path), f"{cmd} created {path}")
            check(not os.path.exists(os.path.join(sb.dir, "no")), f"{cmd} created a folder")
    sb.close()


def test_empty_file_gets_no_schema_from_a_read():
    sb = Sandbox()
    open(sb.db, "w").close()
    for cmd in READS + [["migrate"]]:
        rc, _, err = sb.gs(*cmd)
        check(one_line_error(rc, err) and "empty" in err, f"{cmd}: rc {rc} {err!r}")
        check(os.path.getsize(sb.db) == 0, f"{cmd} wrote into the empty file")
    sb.close()


def test_folder_as_store_is_a_clear_error():
    sb = Sandbox()
    os.mkdir(sb.db)
    for cmd in READS + [["migrate"], ["run", "--", "true"]]:
        rc, _, err = sb.gs(*cmd)
        check(one_line_error(rc, err) and "is a folder" in err and "unable to open" not in err,
              f"{cmd}: rc {rc} {err!r}")
    sb.close()


def as_reader(sb):
    """preexec_fn: as uid 65534 (nobody) when we are root (root writes any folder), so the folder
    is read-only."""
    if os.geteuid() != 0:
        return None

    def drop():
        os.setgid(65534)
        os.setuid(65534)
    return drop


def test_store_in_a_read_only_folder_can_be_read():
    sb = Sandbox()
    sb.ok("run", "--quiet", "--name", "kept", "--", "true")
    binary = os.path.join(sb.dir, "gpuscope")  # nobody may not reach the build folder (under /root, say)
    shutil.copy(BIN, binary)
    os.chmod(binary, 0o755)
    os.chmod(sb.dir, 0o555)
    os.chmod(sb.db, 0o444)
    check(not os.path.exists(sb.db + "-wal"), "the writer left its -wal behind")
    try:
        for cmd, want in ((["runs", "--json"], '"kept"'), (["metrics", "kept"], "host.mem.used_bytes"),
                          (["report", "kept", "--json"], '"kept"')):
            p = subprocess.run([binary, *cmd], capture_output=True, text=True, env=sb.env, preexec_fn=as_reader(sb),
                               timeout=60)
            check(p.returncode == 0 and want in p.stdout, f"{cmd}: rc {p.returncode} {p.stderr!r}")
        p = subprocess.run([binary, "run", "--", "true"], capture_output=True, text=True, env=sb.env,
                           preexec_fn=as_reader(sb), timeout=60)
        check(p.returncode == 3 and "read-only" in p.stderr, f"run on a read-only store: {p.returncode} {p.stderr!r}")
    finally:
        os.chmod(sb.dir, 0o755)
    sb.close()


def test_only_migrate_and_run_migrate():
    sb = Sandbox()
    sb.ok("run", "--quiet", "--name", "old", "--", "true")
    db = sqlite3.connect(sb.db)
    db.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    before = digest(sb.db)
    for cmd in READS:
        rc, _, err = sb.gs(*cmd)
        check(rc == 0, f"{cmd} on a version-1 store: rc {rc} {err!r}")
    check(digest(sb.db) == before, "a read migrated (or wrote) the store")
    out = sb.ok("migrate")
    check("from schema version 1 to 3" in out, out)
    db = sqlite3.connect(sb.db)
    check(db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == "3")
    db.close()
    check("already" in sb.ok("migrate"))
    sb.close()


def limited_run(sb, limit, *args, raise_after=None):
    """gpuscope run under a file size limit of `limit` bytes (SIGXFSZ ignored, as a process under
    `ulimit -f` that does not die of it); with raise_after, the limit is lifted after that many
    seconds (the disk has space again). Returns (rc, stderr)."""
    def pre():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
    p = subprocess.Popen([BIN, "run", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=sb.env, preexec_fn=pre)
    if raise_after is not None:
        time.sleep(raise_after)
        resource.prlimit(p.pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    _, err = p.communicate(timeout=120)
    return p.returncode, err


def largest_gap_s(sb, ref, metric):
    rows = sb.csv("show", ref, "--metric", metric, "--csv")
    ts = [float(r["t_s"]) for r in rows]
    check(ts and all(b > a for a, b in zip(ts, ts[1:])), f"{metric}: time must move forward: {ts[:20]}")
    return max((b - a for a, b in zip(ts, ts[1:])), default=0)


def test_full_disk_during_a_run_loses_nothing_and_names_the_cause():
    sb = Sandbox()
    sb.ok("run", "--quiet", "--name", "first", "--", "true")  # the store exists; its WAL is gone
    rc, err = limited_run(sb, 64 * 1024, "--quiet", "--name", "full", "--interval", "50ms", "--flush", "200ms",
                          "--", "sh", "-c", "sleep 4; exit 7", raise_after=2.0)
    check(rc == 7, f"the run must exit with the job's status: {rc} {err!r}")
    check("cannot write to the store" in err and ("file size limit" in err or "disk full" in err),
          f"the cause is named: {err!r}")
    check("nothing was lost" in err, f"the summary says what was kept: {err!r}")
    run = [r for r in sb.json("runs", "--json") if r["name"] == "full"][0]
    check(run["status"] == "failed" and run["exit_code"] == 7, str(run))
    gap = largest_gap_s(sb, "full", "host.mem.used_bytes")
    check(gap < 1.0, f"samples of the outage were lost: a {gap:.2f} s gap")
    rep = sb.json("report", "full", "--json")
    note = [n for n in rep["notes"] if "nothing was lost" in n]
    check(note, str(rep["notes"]))
    mem = [m for m in sb.json("metrics", "full", "--json") if m["name"] == "host.mem.used_bytes"][0]
    print(f"     full disk for 2 s of a 4 s run: {note[0].split(':')[0]}; host.mem.used_bytes {mem['count']} "
          f"samples, largest gap {gap:.2f} s")
    sb.ok("run", "--quiet", "--name", "after", "--", "sleep", "0.3")  # a later run inherits nothing
    after = sb.json("metrics", "after", "--json")
    check(any(m["name"] == "host.mem.used_bytes" for m in after), f"the next run has its own samples: {after}")
    for m in after:
        check(m["count"] < 100, f"the next run inherited samples: {m}")
    largest_gap_s(sb, "after", "host.mem.used_bytes")
    sb.close()


def test_full_disk_to_the_end_says_what_was_not_kept():
    sb = Sandbox()
    sb.ok("run", "--quiet", "--name", "first", "--", "true")
    rc, err = limited_run(sb, 64 * 1024, "--quiet", "--interval", "50ms", "--flush", "200ms", "--",
                          "sh", "-c", "sleep 2; exit 5")
    check(rc == 5, f"the run must exit with the job's status: {rc} {err!r}")
    check("did not keep" in err and ("file size limit" in err or "disk full" in err), err)
    line = [x for x in err.splitlines() if "did not keep" in x][0]
    print("     full disk to the end:", line.split(":")[1].strip())
    sb.close()


if __name__ == "__main__":
    run_tests(globals())
