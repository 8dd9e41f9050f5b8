"""An SQLite store on a disk that fills up mid-run and stays full to the end (a 1 MiB tmpfs, so root):
what the file cannot take — the last samples and the run's end — is kept in the spool folder, said,
read from there by readers, and written in by the next run. Counted against the job's numbered
ticks (none lost, none twice) and its status. In a script of its own: it skips where no tmpfs can
be mounted, and a skip must not hide test_store_faults.py's results."""
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from gstest import *  # noqa: E402,F401

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


def tick_job(sb, n, period=0.02):
    return [PYTHON, os.path.join(sb.dir, "tick_job.py"), str(n), str(period)]


def run_status(sb, name):
    runs = [r for r in sb.json("runs", "--json") if r.get("name") == name]
    check(len(runs) == 1, f"run {name} is not recorded once: {runs}")
    return runs[0]["status"], runs[0]["exit_code"]


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


def fill(path):
    """Fills the file system of path to its last byte with a file at path."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while os.write(fd, b"\0" * 4096) > 0:
            pass
    except OSError:
        pass  # full: ENOSPC
    os.close(fd)


def test_sqlite_disk_full_to_the_end_keeps_the_run_elsewhere():
    # The store on a 1 MiB tmpfs that fills up 1 s into a 3 s run and stays full to its end: what
    # the file could not take — the last samples and the run's end — goes to a kept file in the
    # spool folder (another disk), said on stderr; a reader reads the run's end there; once space
    # is back, the next run writes them in.
    if os.geteuid() != 0 or not shutil.which("mount"):
        skip("a tmpfs needs root (mount -t tmpfs)")
    mnt = tempfile.mkdtemp(prefix="gs-full-")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mnt], capture_output=True, text=True)
    if r.returncode != 0:
        os.rmdir(mnt)
        skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    sb = Sandbox()
    spool = os.path.join(sb.dir, "spool")
    try:
        sb.env["GPUSCOPE_STORE"] = "sqlite://" + os.path.join(mnt, "gs.db")
        sb.env["GPUSCOPE_SPOOL_DIR"] = spool
        with open(os.path.join(sb.dir, "tick_job.py"), "w") as f:
            f.write(TICK_JOB)
        sb.ok("run", "--name", "schema", "--", "true")
        filler = os.path.join(mnt, "filler")
        th = at([(1.0, lambda: fill(filler))])
        rc, out, err = sb.gs("run", "--name", "full", "--interval", "100ms", "--", *tick_job(sb, 150), timeout=120)
        th.join()
        check(rc == 0, f"run exited {rc}, the job 0:\n{err}")
        kept = [f for f in os.listdir(spool) if f.startswith("kept-")] if os.path.isdir(spool) else []
        check(len(kept) == 1 and os.path.join(spool, kept[0]) in err and "the store did not keep" not in err,
              f"the agent does not say where it kept the run ({kept}):\n{err}")
        check("(full) — finished" in err and "(exit 0)" in err, f"the summary does not read the kept end:\n{err}")
        check(run_status(sb, "full") == ("finished", 0), "a reader does not read the run's end where it is kept")
        # a run in another store leaves the kept file alone: its run is not that store's to finish
        # (mutation: sqlite_kept.c's `if (!run_open_here(s, id))` skipped)
        other = "sqlite://" + os.path.join(sb.dir, "other.db")
        sb.ok("run", "--name", "elsewhere", "--", "true", env={"GPUSCOPE_STORE": other})
        check(kept[0] in os.listdir(spool), f"a run in another store took the kept file: {os.listdir(spool)}")
        check([r["name"] for r in sb.json("runs", "--json", env={"GPUSCOPE_STORE": other})] == ["elsewhere"],
              "another store holds more than its own run")
        os.unlink(filler)
        sb.ok("run", "--name", "next", "--", "true")
        values = [float(r["value"]) for r in sb.csv("show", "full", "--metric", "tick", "--csv")]
        print(f"     full: {len(values)} tick samples of 150 sent, {150 - len(set(values))} lost,"
              f" {len(values) - len(set(values))} twice")
        check(values == [float(i) for i in range(150)], "ticks lost, doubled or out of order")
        check(run_status(sb, "full") == ("finished", 0), f"run full reads {run_status(sb, 'full')}")
        check(not os.listdir(spool), f"the kept file was kept after it was written in: {os.listdir(spool)}")
    finally:
        subprocess.run(["umount", "-l", mnt])
        os.rmdir(mnt)
        sb.close()


if __name__ == "__main__":
    run_tests(globals())
