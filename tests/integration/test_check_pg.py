"""The CI gate as docs/ci.md sets it up, on a real PostgreSQL server (tests/pg/pgserver.py): the
main branch's pipeline and a pull request's write into one store, the password from PGPASSWORD
(a CI secret: no password file, none in the URL), and `gpuscope check PR --baseline smoke-main`
judges the pull request's run against the newest run named smoke-main: a slower one fails (exit 1),
an unchanged one passes (exit 0), the password is never printed."""
import atexit
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pg"))
from gstest import *  # noqa: E402,F401,F403
from pgserver import PASSWORD, PgServer  # noqa: E402

_made = {}


def setup(sb):
    pg = _made["pg"] = PgServer()
    atexit.register(pg.close)
    env = pg.env(sb.env)
    env.pop("PGPASSFILE")
    env.update(PGPASSWORD=PASSWORD, GPUSCOPE_STORE=pg.url("ci"), GPUSCOPE_SPOOL_DIR=os.path.join(sb.dir, "spool"))
    sb.env = env
    ids = _made["ids"] = {}

    def runs(*jobs):
        procs = [(commit, subprocess.Popen([BIN, "run", "--name", name, "--tag", f"commit={commit}", "--",
                                            *sb.step_job(data, 0.03, 30)], env=env, stdout=subprocess.PIPE,
                                           stderr=subprocess.PIPE, text=True)) for name, commit, data in jobs]
        for commit, p in procs:
            out, err = p.communicate(timeout=300)
            check(p.returncode == 0 and PASSWORD not in out + err, f"run {commit}: exit {p.returncode}\n{out}{err}")
            ids[commit] = re.search(r"gpuscope: run (\w+) \(", err).group(1)
    # an older push to main, slower (it must not be the baseline); then, at the same time, so that the
    # machine's load weighs on them alike, the newest push to main and two pull requests
    # (each step computes 30 ms; the slow ones wait 80 ms for data, the others 1 ms)
    runs(("smoke-main", "aaa", 0.08))
    runs(("smoke-main", "bbb", 0.001), ("smoke-pr-7", "ccc", 0.08), ("smoke-pr-8", "ddd", 0.001))


SB = shared_sandbox(setup)
BUDGETS = ["--min-speedup", "0.95", "--max-data-wait", "20%", "--forbid", "input_bound,input_latency"]


def test_a_slower_pull_request_fails_against_the_newest_main_run():
    sb = SB()
    rc, out, err = sb.gs("check", "smoke-pr-7", "--baseline", "smoke-main", *BUDGETS, "--json")
    check(rc == 1 and PASSWORD not in out + err, f"exit {rc}\n{out}{err}")
    j = json.loads(out)
    print(f"     {[(b['budget'], b['status'], b['measured'], b['ci']) for b in j['budgets'][:2]]}")
    check(j["baseline"]["id"] == _made["ids"]["bbb"] and j["run"]["id"] == _made["ids"]["ccc"], out)
    broken = {b["budget"] for b in j["budgets"] if b["status"] != "ok"}
    check({"min_speedup", "max_data_wait"} <= broken, out)


def test_an_unchanged_pull_request_passes():
    """At a budget its 30 steps can judge: two runs of the same job side by side on a loaded 2-core
    machine measure about 1x with an interval of several per cent, which a 0.95x budget spans
    ("cannot tell", exit 1), so the unchanged one is held to 0.7x, which pr-7 (0.3x) breaks."""
    sb = SB()
    rc, out, err = sb.gs("check", "smoke-pr-8", "--baseline", "smoke-main", "--min-speedup", "0.7", *BUDGETS[2:])
    check(rc == 0 and "budgets hold: passed" in out and PASSWORD not in out + err, f"exit {rc}\n{out}{err}")


if __name__ == "__main__":
    run_tests(globals())
