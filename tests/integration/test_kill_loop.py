"""SIGKILL at 30 random moments (issue 11, Proof): the agent is killed while it starts, samples,
commits, or closes its run. After every kill the store passes PRAGMA integrity_check, every sample a
reader saw committed before the kill is still there, and the next start closes the dead agent's run
as `crashed` — checked in the raw table, not through `gpuscope runs` (which would settle it itself)."""
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa: E402,F403

KILLS = 30


def raw_runs(db):
    con = sqlite3.connect(db, timeout=30)
    try:
        return con.execute("SELECT id, status FROM runs ORDER BY start_wall_ns").fetchall()
    finally:
        con.close()


def integrity(db):
    con = sqlite3.connect(db, timeout=30)
    try:
        return con.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        con.close()


def samples(sb, run_id):
    rc, out, _ = sb.gs("show", run_id, "--metric", "host.mem.used_bytes", "--csv")
    return set(out.splitlines()[1:]) if rc == 0 else set()


def test_thirty_sigkills_leave_sound_stores_and_crashed_runs():
    rng = random.Random(int(os.environ.get("GS_SEED", "11")))
    sb = Sandbox()
    sb.ok("run", "--quiet", "--", "true")  # the store exists before the first kill
    killed_running = []  # runs killed while their job still ran: must end up crashed
    stats = {"corrupt": 0, "lost": 0, "checked_samples": 0, "end_phase": 0}
    for i in range(KILLS):
        short = i % 3 == 2  # every third: a short job, killed around its end (run_end, doctor)
        job = ["sleep", "0.4"] if short else ["sleep", "30"]
        before = {r[0] for r in raw_runs(sb.db)}
        # what a dead agent left must be closed by this start, before it records its own run
        p = subprocess.Popen([BIN, "run", "--quiet", "--flush", "200ms", "--interval", "20ms", "--", *job],
                             env=sb.env, start_new_session=True, stderr=subprocess.DEVNULL)
        wait = rng.uniform(0.25, 0.7) if short else rng.uniform(0.0, 1.5)
        seen, rid = set(), None
        if wait > 0.6 and not short:  # read what is committed, then kill
            time.sleep(wait - 0.3)
            new = [r for r in raw_runs(sb.db) if r[0] not in before]
            if new:
                rid = new[0][0]
                seen = samples(sb, rid)
            time.sleep(0.3)
        else:
            time.sleep(wait)
        finished = p.poll() is not None
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()
        if short:
            stats["end_phase"] += 1
        check(integrity(sb.db) == "ok", f"kill {i} at {wait:.2f} s: the store is corrupt")
        new = [r for r in raw_runs(sb.db) if r[0] not in before]
        if rid:
            after = samples(sb, rid)
            stats["checked_samples"] += len(seen)
            lost = seen - after
            stats["lost"] += len(lost)
            check(not lost, f"kill {i}: {len(lost)} of {len(seen)} committed samples lost")
        if new and not short and not finished:
            killed_running.append(new[0][0])
    sb.ok("run", "--quiet", "--", "true")  # the next start after the last kill
    status = dict(raw_runs(sb.db))
    still = [r for r, s in status.items() if s == "running"]
    check(not still, f"{len(still)} runs still 'running' after the next start: {still}")
    bad = [(r, status[r]) for r in killed_running if status.get(r) != "crashed"]
    check(not bad, f"runs killed while running not marked crashed: {bad}")
    print(f"     {KILLS} kills: {len(killed_running)} while running, {stats['end_phase']} around the job's end; "
          f"0 corrupt stores; {stats['checked_samples']} committed samples checked, {stats['lost']} lost; "
          f"{len(status)} runs, none left running")
    sb.close()


if __name__ == "__main__":
    run_tests(globals())
