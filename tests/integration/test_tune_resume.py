"""`gpuscope tune --resume NAME`: a sweep of four trials is killed (SIGKILL to tune: no chance to
clean up) while its third trial runs — that trial's job waits for a file the test writes only
afterwards, so it cannot have finished; it gets SIGTERM from the kernel (the agent's parent-death
signal, passed on to the job) and its run closes short of its steps. `gpuscope tune --resume NAME`,
with no other argument, reads the sweep's own arguments back from the trials' runs, takes trials 01
and 02 from the store (the same runs, not rerun) and runs only the rest, 03 and 04 (--yes: the
command read from the store is printed and run only when confirmed). A stored trial of another
command is not reused."""
import json
import os
import re
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import BIN, PYTHON, Sandbox, check, run_tests, wait_until  # noqa: E402


# JOB DIR WAIT K: reports 16 steps of 20 ms; the trial whose K is WAIT first writes DIR/WAIT.started
# and waits for DIR/go.
JOB = r'''
import os, socket, sys, time
d, wait, k = sys.argv[1], sys.argv[2], sys.argv[3]
if k == wait:
    open(os.path.join(d, wait + ".started"), "w").close()
    until = time.monotonic() + 60
    while not os.path.exists(os.path.join(d, "go")) and time.monotonic() < until:
        time.sleep(0.01)
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
for i in range(16):
    time.sleep(0.02)
    s.sendto(f"gs1 step {i} data=0.01 compute=0.01 samples=32 t={time.monotonic():.6f}".encode(),
             os.environ["GPUSCOPE_SOCKET"])
'''


def runs(sb, group):
    return sb.json("runs", "--group", group, "--json")


def test_a_killed_sweep_resumes_and_runs_only_the_trials_not_finished():
    sb = Sandbox()
    try:
        job = os.path.join(sb.dir, "job.py")
        with open(job, "w") as f:
            f.write(JOB)
        cmd = [BIN, "tune", "--name", "sw", "--steps", "12", "--warmup", "2", "--param", "k=a,b,c,d", "--", PYTHON,
               job, sb.dir, "c", "{k}"]
        p = subprocess.Popen(cmd, env=sb.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        started = os.path.join(sb.dir, "c.started")
        wait_until(lambda: os.path.exists(started), "trial 03's job to start", timeout=120, proc=p)
        p.send_signal(signal.SIGKILL)
        seen = p.stderr.read().splitlines()
        p.wait(timeout=60)
        check(any(x.startswith("[tune] 02 ") for x in seen), f"tune printed: {seen}")
        wait_until(lambda: all(r["status"] != "running" for r in runs(sb, "sw")), "the orphaned trial's run to close",
                   timeout=120)
        before = {r["name"]: r for r in runs(sb, "sw")}
        open(os.path.join(sb.dir, "go"), "w").close()
        check("sw/01" in before and "sw/02" in before and "sw/03" in before and "sw/04" not in before,
              str(sorted(before)))
        rc, out, err = sb.gs("tune", "--resume", "sw", "--yes", "--json", timeout=200)
        check(rc == 0, f"tune --resume exited {rc}\n{out}\n{err}")
        r = json.loads(out)
        t = r["trials"]
        check(len(t) == 4 and all(x["status"] == "ok" for x in t), str(t))
        check(r["resumed"] and r["name"] == "sw" and r["params"] == {"k": ["a", "b", "c", "d"]}, str(r))
        for k in (0, 1):
            check(t[k]["resumed"] and t[k]["run_id"] == before[f"sw/0{k + 1}"]["id"], f"trial {k + 1} from the store")
        for k in (2, 3):
            check(not t[k]["resumed"], f"trial {k + 1} ran again: {t[k]}")
        check(t[2]["run_id"] != before["sw/03"]["id"], "03, stopped short by tune's death, is a new run")
        after = runs(sb, "sw")
        check(sum(x["name"] == "sw/01" for x in after) == 1 and sum(x["name"] == "sw/02" for x in after) == 1,
              "01 and 02 were not run again")
        check(sum(x["name"] == "sw/04" for x in after) == 1, "04 ran once")
        check("from the store" in err, err)
    finally:
        sb.close()


def test_a_trial_of_another_command_is_not_reused_and_the_stored_command_is_asked_for():
    """Two sweeps named sw2 with the same grid but another command (A-{k}, then B-{k}, killed during
    its first trial): --resume reads B's arguments, prints the command and, without a terminal to
    ask on, refuses to run it without --yes (exit 2, nothing run); with --yes it runs, and sw2/02 in
    the store (variant A's) is not reused: its recorded command differs, and the line says so."""
    sb = Sandbox()
    try:
        job = os.path.join(sb.dir, "job.py")
        with open(job, "w") as f:
            f.write(JOB)
        base = [BIN, "tune", "--name", "sw2", "--steps", "4", "--warmup", "1", "--param", "k=a,b", "--", PYTHON, job,
                sb.dir, "B-a"]
        p = subprocess.run(base + ["A-{k}"], env=sb.env, capture_output=True, text=True, timeout=200)
        check(p.returncode == 0, f"sweep A: exit {p.returncode}\n{p.stderr}")
        a_runs = {r["name"]: r["id"] for r in runs(sb, "sw2")}
        p = subprocess.Popen(base + ["B-{k}"], env=sb.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(lambda: os.path.exists(os.path.join(sb.dir, "B-a.started")), "sweep B's first job", timeout=120,
                   proc=p)
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=60)
        wait_until(lambda: all(r["status"] != "running" for r in runs(sb, "sw2")), "the killed trial's run to close",
                   timeout=120)
        open(os.path.join(sb.dir, "go"), "w").close()
        n_before = len(runs(sb, "sw2"))
        rc, out, err = sb.gs("tune", "--resume", "sw2", "--json", input="y\n")
        check(rc == 2 and "add --yes" in err and f"{job} {sb.dir} B-a B-{{k}}" in err,
              f"exit {rc}\n{err}")
        check(len(runs(sb, "sw2")) == n_before, "nothing ran without --yes")
        rc, out, err = sb.gs("tune", "--resume", "sw2", "--yes", "--json", timeout=200)
        check(rc == 0, f"tune --resume --yes exited {rc}\n{out}\n{err}")
        t = json.loads(out)["trials"]
        check(len(t) == 2 and not t[1]["resumed"] and t[1]["run_id"] != a_runs["sw2/02"], str(t))
        check(re.search(r"02 k=b: run \w+ in the store is not reused, it runs again: argument \d+ of its tune was "
                        r"'A-\{k\}', now 'B-\{k\}'", err), err)
    finally:
        sb.close()


def test_a_command_from_an_imported_sweep_is_shown_marked_and_not_run_unasked():
    """A sweep's runs exported and imported into another store (a file from anywhere): the imported
    runs carry gpuscope.imported; tune --resume in that store prints the stored command, says it was
    imported, and without a terminal or --yes runs nothing (the marker file the command would make
    stays absent)."""
    sb = Sandbox()
    try:
        marker = os.path.join(sb.dir, "ran")
        rc, out, err = sb.gs("tune", "--name", "evil", "--steps", "1", "--warmup", "0", "--param", "k=a", "--",
                             "sh", "-c", 'touch "$0"', marker + "{k}", timeout=120)
        check(os.path.exists(marker + "a"), f"the sweep ran its command: exit {rc}\n{err}")
        os.unlink(marker + "a")
        path = os.path.join(sb.dir, "sweep.jsonl")
        ids = [r["id"] for r in runs(sb, "evil")]
        sb.ok("export", *ids, "-o", path)
        other = "sqlite://" + os.path.join(sb.dir, "other.db")
        sb.ok("import", path, "--store", other)
        params = sb.json("show", ids[0], "--params", "--json", "--store", other)
        check(params.get("gpuscope.imported", "").startswith(path + ", "), f"marked as imported: {params}")
        rc, out, err = sb.gs("tune", "--resume", "evil", "--store", other)
        check(rc == 2 and "imported: " + path in err and "touch" in err and "add --yes" in err, f"exit {rc}\n{err}")
        check(not os.path.exists(marker + "a"), "the stored command did not run")
    finally:
        sb.close()


if __name__ == "__main__":
    run_tests(globals())
