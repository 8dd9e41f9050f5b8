"""`gpuscope tune --quality` on real PyTorch (CPU, /usr/bin/python3): examples/tune_lr.py, softmax
regression by plain SGD, logs its held-out loss after every step. With --samples every trial sees the
same 32,768 samples (the client's steps x batch), so batch 512 takes 64 steps where batch 32 takes
1024: at batch 32's learning rate it learns visibly worse (held-out loss about 1.8 against 0.6), is
marked worse and cannot win although it is the fastest; with --lr-rule linear its {lr} is 16 x 0.05
= 0.8, its loss is as low as batch 32's, and it wins with its speed-up over the baseline printed.
Each step also sleeps 1 ms, host overhead the big batch amortises. (At 16,384 samples and no overhead
batch 512 measured 30 steps of 2 ms: on a loaded machine a few preempted steps made its rate 251k ±
199k samples/s, within noise of batch 32's 57k, and tune rightly called a tie. 64 steps of 3 ms give
the interval the points to tell; batch 32 stays under the agent's 1,000 steps a second.)"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import PYTHON, SRC, Sandbox, check, run_tests, shared_sandbox  # noqa: E402

ENV = {"PYTHONPATH": os.path.join(SRC, "clients", "python")}
EXAMPLE = os.path.join(SRC, "examples", "tune_lr.py")
COMMON = ["--param", "batch_size=32,512", "--samples", "32768", "--warmup", "2", "--quality", "val_loss",
          "--lr-base", "0.05@32"]
CMD = ["--", PYTHON, EXAMPLE, "--batch-size", "{batch_size}", "--lr", "{lr}", "--step-overhead-ms", "1"]

results = {}


def sweeps(sb):
    rc, out, err = sb.gs("tune", "--name", "base", "--lr-rule", "none", "--json", *COMMON, *CMD, env=ENV, timeout=280)
    check(rc == 0, f"tune --lr-rule none exited {rc}\n{out}\n{err}")
    results["none"] = json.loads(out)
    rc, out, err = sb.gs("tune", "--name", "linear", "--lr-rule", "linear", *COMMON, *CMD, env=ENV, timeout=280)
    check(rc == 0, f"tune --lr-rule linear exited {rc}\n{out}\n{err}")
    results["linear"] = out
    print(json.dumps(results["none"]["trials"], indent=1)[:3000])
    print(out)


sandbox = shared_sandbox(sweeps)


def test_samples_gives_every_trial_the_same_sample_count():
    sandbox()
    trials = results["none"]["trials"]
    check(len(trials) == 2 and all(t["status"] == "ok" for t in trials), str(trials))
    for t in trials:
        check(t["samples_seen"] == 32768, f"steps x batch up to the window's end: {t}")
    check(trials[0]["steps_measured"] == 1024 - 2 and trials[1]["steps_measured"] == 64 - 2, str(trials))


def test_big_batch_at_the_base_rate_is_worse_and_not_the_winner():
    sandbox()
    r = results["none"]
    small, big = r["trials"]
    check(small["lr"] == 0.05 and big["lr"] == 0.05, "rule none: the base rate for every batch")
    check(big["rate"] > small["rate"], f"the big batch is the faster: {big['rate']} vs {small['rate']}")
    check(big["verdict"] == "worse" and small["verdict"] == "baseline", f"{small['verdict']} {big['verdict']}")
    check(big["quality"] > small["quality"] + 0.5, f"held-out loss {big['quality']} vs {small['quality']}")
    check(r["winner"] == 1 and r["recommended"] == 1 and not big["tied"], f"winner {r['winner']}")
    check(r["quality"]["point"] == 32768 and r["quality"]["metric"] == "val_loss", str(r["quality"]))


def test_with_the_linear_rule_the_big_batch_trains_as_well_and_wins():
    sandbox()
    out = results["linear"]
    row = [line for line in out.splitlines() if re.match(r"\s*02 batch_size=512", line)]
    check(row and " 0.8 " in row[0] and " same " in row[0], f"the row of 02 has lr 0.8 and quality same:\n{out}")
    check("worse" not in out, out)
    check(re.search(r"^winner: 02 batch_size=512 .*; [0-9.]+x the baseline \(01\)$", out, re.M), out)
    speedup = float(re.search(r"; ([0-9.]+)x the baseline", out).group(1))
    check(speedup > 1, f"speed-up {speedup}")


def test_bad_combinations_are_usage_errors_before_anything_runs():
    sb = Sandbox()
    try:
        job = ["--", PYTHON, EXAMPLE, "--batch-size", "{batch_size}"]
        bad = [
            (["--param", "batch_size=32,64", *job, "--lr", "{lr}"], "--lr-base"),
            (["--param", "batch_size=32,64", "--lr-base", "0.1@32", *job], "no {lr}"),
            (["--param", "batch_size=32,64", "--lr-rule", "sqrt", *job], "--lr-base"),
            (["--param", "batch_size=32,64", "--lr-base", "0.1", *job, "--lr", "{lr}"], "RATE@BATCH"),
            (["--param", "batch_size=32,64", "--samples", "64", "--steps", "4", *job], "--samples"),
            (["--param", "batch_size=32,64", "--quality-tol", "2%", *job], "--quality"),
            (["--param", "batch_size=32,64", "--quality", "loss:best", *job], "METRIC:min"),
            (["--param", "batch_size=32,64", "--gpus", "0,0", *job], "twice"),
            (["--resume", "x", "--param", "batch_size=32", *job], "--resume"),
        ]
        for args, why in bad:
            rc, out, err = sb.gs("tune", *args)
            check(rc == 2 and why in err and len(err.strip().splitlines()) == 1, f"{args}: exit {rc}, {err!r}")
        rc, out, err = sb.gs("tune", "--resume", "nosuch")
        check(rc == 1 and "no sweep of that name" in err, f"exit {rc}, {err!r}")
        check(not os.path.exists(sb.db) or not sb.json("runs", "--json"), "nothing ran")
    finally:
        sb.close()


if __name__ == "__main__":
    run_tests(globals())
