"""`gpuscope tune --resume NAME`: a sweep of four trials is killed (SIGKILL to tune: no chance to
clean up) once its second trial has ended; the trial then running gets SIGTERM from the kernel
(the agent's parent-death signal) and its run closes short of its steps. `gpuscope tune --resume
NAME`, with no other argument, reads the sweep's own arguments back from the trials' runs, takes
trials 01 and 02 from the store (the same runs, not rerun) and runs only the rest, 03 and 04."""
import json
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import BIN, Sandbox, check, run_tests, wait_until  # noqa: E402


def runs(sb, group):
    return sb.json("runs", "--group", group, "--json")


def test_a_killed_sweep_resumes_and_runs_only_the_trials_not_finished():
    sb = Sandbox()
    try:
        # 20 steps of 50 ms: a trial lasts a second or more, so the third has not ended when tune dies
        job = sb.step_job(0.04, 0.01, 20)
        cmd = [BIN, "tune", "--name", "sw", "--steps", "12", "--warmup", "2", "--param", "k=a,b,c,d", "--", *job,
               "id={k}"]
        p = subprocess.Popen(cmd, env=sb.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        seen = []
        for line in p.stderr:
            seen.append(line)
            if line.startswith("[tune] 02 "):
                p.send_signal(signal.SIGKILL)
                break
        p.wait(timeout=60)
        check(any(x.startswith("[tune] 02 ") for x in seen), f"tune printed: {seen}")
        wait_until(lambda: all(r["status"] != "running" for r in runs(sb, "sw")), "the orphaned trial's run to close",
                   timeout=120)
        before = {r["name"]: r for r in runs(sb, "sw")}
        check("sw/01" in before and "sw/02" in before and "sw/04" not in before, str(sorted(before)))
        rc, out, err = sb.gs("tune", "--resume", "sw", "--json", timeout=200)
        check(rc == 0, f"tune --resume exited {rc}\n{out}\n{err}")
        r = json.loads(out)
        t = r["trials"]
        check(len(t) == 4 and all(x["status"] == "ok" for x in t), str(t))
        check(r["resumed"] and r["name"] == "sw" and r["params"] == {"k": ["a", "b", "c", "d"]}, str(r))
        for k in (0, 1):
            check(t[k]["resumed"] and t[k]["run_id"] == before[f"sw/0{k + 1}"]["id"], f"trial {k + 1} from the store")
        for k in (2, 3):
            check(not t[k]["resumed"], f"trial {k + 1} ran again: {t[k]}")
        after = runs(sb, "sw")
        check(sum(x["name"] == "sw/01" for x in after) == 1 and sum(x["name"] == "sw/02" for x in after) == 1,
              "01 and 02 were not run again")
        check(sum(x["name"] == "sw/04" for x in after) == 1, "04 ran once")
        check("from the store" in err, err)
    finally:
        sb.close()


if __name__ == "__main__":
    run_tests(globals())
