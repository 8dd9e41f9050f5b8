"""A distributed job's ranks keep their own step series: two processes of one job, one with RANK=0
and one with RANK=1 (as torchrun sets it), each report their own loop through the Python client.
Rank 0's steps stay unlabelled (the series the doctor reads), rank 1's are labelled rank=1, and
neither series holds the other's steps. Also: set_rank() where no launcher variable says it."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa: E402,F403

CLIENT = os.path.join(SRC, "clients", "python")

RANK_JOB = r'''
import os, sys, time
import gpuscope
steps, sleep_s = int(sys.argv[1]), float(sys.argv[2])
if len(sys.argv) > 3:
    gpuscope.set_rank(int(sys.argv[3]))
for batch in gpuscope.watch(range(steps)):
    time.sleep(sleep_s)
gpuscope.flush()
'''


def step_rows(sb, name):
    rows = sb.csv("show", "last", "--metric", name, "--csv")
    out = {}
    for r in rows:
        out.setdefault(r["labels"], []).append(float(r["value"]))
    return out


def test_ranks_keep_their_own_steps():
    sb = Sandbox()
    job = os.path.join(sb.dir, "rank_job.py")
    with open(job, "w") as f:
        f.write(RANK_JOB)
    # rank 0: 12 steps of 20 ms; rank 1: 7 steps of 50 ms; a third process sets rank 2 itself
    script = (f"RANK=0 {PYTHON} {job} 12 0.02 & RANK=1 {PYTHON} {job} 7 0.05 & "
              f"{PYTHON} {job} 5 0.01 2 & wait")
    sb.ok("run", "--quiet", "--", "sh", "-c", script, env={"PYTHONPATH": CLIENT})
    n = step_rows(sb, "step.n")
    check(set(n) == {"", "rank=1", "rank=2"}, f"labels {sorted(n)}")
    check(n[""] == [float(i) for i in range(12)], f"rank 0 steps {n['']}")
    check(n["rank=1"] == [float(i) for i in range(7)], f"rank 1 steps {n['rank=1']}")
    check(n["rank=2"] == [float(i) for i in range(5)], f"rank 2 steps {n['rank=2']}")
    total = step_rows(sb, "step.total_s")
    check(len(total[""]) == 12 and len(total["rank=1"]) == 7, str({k: len(v) for k, v in total.items()}))
    # Rank 1 sleeps 50 ms a step, so none of its steps is shorter (a lower bound holds on any load;
    # whether rank 0's 20 ms steps stay short while three interpreters start does not): its series
    # holds its own steps, and the counts above show no series holds another's.
    check(min(total["rank=1"]) >= 0.045, f"rank 1's steps took >= 50 ms each: {total['rank=1']}")
    check(min(total[""]) >= 0.018, f"rank 0's steps took >= 20 ms each: {total['']}")
    sb.close()


if __name__ == "__main__":
    run_tests(globals())
