"""`gpuscope tune` when configurations go wrong, on real PyTorch (CPU): under an address-space limit
the tune sets (--mem-limit, RLIMIT_AS) a too-big batch is `oom` and its bigger siblings are skipped;
a crashing configuration is `failed` with its last output lines kept and the sweep goes on; Ctrl-C
stops the current trial cleanly and prints the table so far; placeholders are checked before
anything runs."""
import json
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import BIN, PYTHON, SRC, Sandbox, check, run_tests, wait_until  # noqa: E402

ENV = {"PYTHONPATH": os.path.join(SRC, "clients", "python")}
EXAMPLE = os.path.join(SRC, "examples", "tune_costly.py")


def tune(sb, *args, rc_want=0, timeout=200):
    rc, out, err = sb.gs("tune", *args, env=ENV, timeout=timeout)
    check(rc == rc_want, f"tune exited {rc}, want {rc_want}\nstdout:\n{out}\nstderr:\n{err}")
    return out, err


def test_too_big_batch_is_oom_and_bigger_ones_are_skipped():
    sb = Sandbox()
    try:
        # 1 MiB of activations per sample: 1024 samples need 1 GiB more than torch's ~0.7 GiB.
        out, err = tune(sb, "--name", "mem", "--steps", "4", "--warmup", "1", "--mem-limit", "1200M", "--json",
                        "--param", "batch_size=16,1024,4096", "--param", "workers=0,2",
                        "--", PYTHON, EXAMPLE, "--batch-size", "{batch_size}", "--workers", "{workers}",
                        "--mem-per-sample-mb", "1")
        r = json.loads(out)
        print("     " + err.strip().replace("\n", "\n     "))
        st = {(t["config"]["workers"], t["config"]["batch_size"]): t for t in r["trials"]}
        for w in ("0", "2"):
            check(st[(w, "16")]["status"] == "ok", str(st[(w, "16")]))
            check(st[(w, "1024")]["status"] == "oom" and "allocate" in st[(w, "1024")]["reason"], str(st[(w, "1024")]))
            check(st[(w, "4096")]["status"] == "skipped" and st[(w, "4096")]["run_id"] is None, str(st[(w, "4096")]))
        win = r["trials"][r["recommended"] - 1]
        check(win["config"]["batch_size"] == "16" and win["margin_ok"] is True, str(win))
        check(win["peak_mem_bytes"] <= 0.9 * win["mem_limit_bytes"] and win["mem_limit_bytes"] == 1200 << 20, str(win))
    finally:
        sb.close()


def test_crashing_trial_is_failed_with_its_stderr_and_the_sweep_completes():
    sb = Sandbox()
    try:
        out, err = tune(sb, "--name", "crash", "--steps", "4", "--warmup", "1", "--param", "transform=broken,ok",
                        "--", PYTHON, EXAMPLE, "--transform", "{transform}", "--batch-size", "8")
        print("     " + out.strip().replace("\n", "\n     "))
        check("failed" in out and "corrupt record" in out, out)
        check("winner: 02 transform=ok" in out, out)
        r = json.loads(tune(sb, "--name", "crash2", "--steps", "4", "--warmup", "1", "--json",
                            "--param", "transform=broken,ok",
                            "--", PYTHON, EXAMPLE, "--transform", "{transform}", "--batch-size", "8")[0])
        bad, good = r["trials"]
        check(bad["status"] == "failed" and bad["exit_status"] == 1, str(bad))
        check(any("ValueError: transform failed" in line for line in bad["stderr_tail"]), str(bad["stderr_tail"]))
        check(good["status"] == "ok" and r["winner"] == 2, str(r))
        check(r["speedup_vs_baseline"] is None, "the baseline failed: its speed-up is unknown, not made up")
    finally:
        sb.close()


def test_ctrl_c_stops_the_trial_and_prints_the_table_so_far():
    sb = Sandbox()
    try:
        env = dict(sb.env, **ENV)
        p = subprocess.Popen([BIN, "tune", "--name", "intr", "--seconds", "60", "--warmup", "1",
                              "--param", "workers=0,2", "--", PYTHON, EXAMPLE, "--workers", "{workers}"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        # The state Ctrl-C is meant to meet: the first trial training, its steps in the store (past
        # torch's import and the loader's start, however loaded the machine).

        def stepping():
            rc, out, _ = sb.gs("show", "intr/01", "--metric", "step.total_s", "--json")
            return rc == 0 and any(len(x["points"]) >= 2 for x in json.loads(out)["series"])
        wait_until(stepping, "the first trial's steps in the store", timeout=120, proc=p)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
        check(p.returncode == 130, f"exit {p.returncode}\n{out}\n{err}")
        check("interrupted: the table so far" in out and "interrupted" in out and "not_run" in out, out)
        runs = sb.ok("runs")
        check("intr/01" in runs and "intr/02" not in runs, runs)
        rep = sb.json("report", "intr/01", "--json")
        run = rep.get("run", rep)
        check(run["status"] != "running" and run["status"] != "crashed", f"the trial's run was closed: {run['status']}")
    finally:
        sb.close()


def test_budget_stops_the_running_trial_and_starts_no_other():
    sb = Sandbox()
    try:
        # The stdlib step job (20 ms steps, no torch to import): the 4 s budget runs out during the
        # first trial however loaded the machine (with the torch example, its import alone took the
        # 4 s under load, and the trial measured nothing).
        out, err = tune(sb, "--name", "bud", "--budget", "4s", "--steps", "100000", "--warmup", "1", "--json",
                        "--param", "workers=0,2", "--", *sb.step_job(0.01, 0.01, 100000, "workers={workers}"))
        r = json.loads(out)
        first, second = r["trials"]
        check(r["budget_out"] is True, str(r))
        check(first["status"] == "ok" and first["steps_measured"] >= 2 and first["exit_status"] == 143, str(first))
        check(second["status"] == "not_run" and second["run_id"] is None, str(second))
    finally:
        sb.close()


def test_unknown_placeholder_and_unused_param_are_usage_errors_before_running():
    sb = Sandbox()
    try:
        marker = os.path.join(sb.dir, "ran")
        cases = [
            (["--param", "workers=0,2", "--", "touch", marker, "{worker}"], "unknown placeholder {worker}"),
            (["--param", "workers=0,2", "--param", "bs=8", "--", "touch", marker, "{workers}"], "--param bs is not used"),
            (["--param", "workers=", "--", "touch", marker, "{workers}"], "empty value"),
            (["--param", "workers=0,2", "--", "touch", marker, "{workers"], "unclosed"),
            (["--strategy", "best", "--param", "w=1", "--", "touch", marker, "{w}"], "--strategy"),
            (["--param", "w=1"], "no command"),
            (["--steps", "5", "--seconds", "3", "--param", "w=1", "--", "touch", marker, "{w}"], "give one"),
            (["--strategy", "halving", "--seconds", "3", "--param", "w=1", "--", "touch", marker, "{w}"], "--seconds"),
        ]
        for args, msg in cases:
            rc, out, err = sb.gs("tune", *args)
            check(rc == 2 and msg in err and len(err.strip().splitlines()) == 1, f"{args}: rc {rc} {err!r}")
        check(not os.path.exists(marker), "nothing ran")
        rc, out, err = sb.gs("runs", "--json")
        check("touch" not in out, out)
    finally:
        sb.close()


def test_placeholders_and_environment_are_filled():
    sb = Sandbox()
    try:
        script = os.path.join(sb.dir, "echo_params.py")
        with open(script, "w") as f:
            f.write("import os, sys\nprint('ARGS', sys.argv[1:], os.environ.get('GPUSCOPE_PARAM_MODE'))\n"
                    "sys.exit(3)\n")
        out, err = tune(sb, "--name", "env", "--json", "--param", "mode=a b,c", "--", PYTHON, script, "x{mode}y",
                        "{{lit}}", rc_want=1)
        r = json.loads(out)
        check([t["status"] for t in r["trials"]] == ["failed", "failed"], str(r))
        tail = r["trials"][0]["stderr_tail"]
        check(any("ARGS ['xa by', '{lit}'] a b" in line for line in tail), str(tail))
        check(r["trials"][0]["reason"] == "the job exited with status 3" and r["best"] is None, str(r["trials"][0]))
    finally:
        sb.close()


if __name__ == "__main__":
    run_tests(globals())
