#!/usr/bin/python3
"""The doctor's estimate against a measured fix: one PyTorch training run with a costly per-sample
transform loaded in the main process (num_workers=0), then the same run with num_workers=2, as its
loader_workers finding advises on this 2-core machine. `gpuscope compare` must show the measured
speed-up, and the doctor's estimate for 2 workers (from the first run's evidence) must lie within
±30 % of it.

Both runs of a pair run with fixed CPU: in a CPU cgroup of the test's own (scenlib.CpuFirst, a child
of the cgroup the test is in, removed after) whose weight puts them before every other task, so the
job gets the CPUs whenever it is runnable, on a busy machine (tests/load.sh) as on an idle one, and
the check is always made. The doctor sees why: the job's processes hardly wait for a CPU, so the
other work on the host took only what the job left (docs/diagnosis.md, "Usable cores"). Where the
cgroup cannot be made (not root, no cpu controller) the old guard stands — the estimate is held to
the measure only where a core was free — and under make check (GS_CHECK_STRICT=1, as root) that is a
failure, not a pass.

The step's compute is part PyTorch on the CPU (~9 ms) and part a 40 ms wait standing in for an
accelerator (the loop sleeps, as it would block on a GPU), so the pair measures the loader fix and
not only how two processes share two cores. The run pair is tried twice at most (a second try is
never silent: it is said as "RETRY" and listed at the end, docs/testing.md); every figure is printed.
Exit 77 without torch (1 under make check).

A second pair checks the straggler-by-rank estimate the same way: two ranks of CPU DDP (gloo) where
rank 1's loader does 8 more augmentation passes per sample, then the same job with even loaders;
the measured speed-up must lie within ±30 % of the finding's 1 / (1 - lost), the ranks having the
CPUs to themselves in the same cgroup (without it, only where the machine's idle CPU, probed before
the pair, is at least 1.75 cores); the straggler named must be rank 1 either way."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scenlib import FREE_CORE, NO_CORE, STRICT, CpuFirst, IdleCores, Sandbox, have_torch, log, skipped, throughput  # noqa: E402

ARGS = ["--seconds", os.environ.get("GS_SCENARIO_SECONDS", "10"), "--width", "8", "--batch", "32", "--work", "30",
        "--sync-ms", "40"]
TOLERANCE = 0.30


REPORT = []


def say(line):
    """Logs a line and keeps it for the build tree's scenario_pair.txt (ctest hides a pass's output)."""
    REPORT.append(line)
    log(line)


def one_round(sb, k, cg):
    before, after = f"before-{k}", f"after-{k}"
    with IdleCores() as idle:
        out_b, _ = sb.run(before, "train.py", ARGS + ["--workers", "0"], cgroup=cg)
    out_a, _ = sb.run(after, "train.py", ARGS + ["--workers", "2"], cgroup=cg)
    rep = sb.report(before)
    rules = sorted(f["rule"] for f in rep["findings"])
    lw = [f for f in rep["findings"] if f["rule"] == "loader_workers"]
    # in the cgroup the job has the CPUs however busy the machine: the estimate is always held
    full = not cg and idle.cores is not None and idle.cores < FREE_CORE
    if full and "input_bound" not in rules:
        raise AssertionError(f"no core was free ({idle.cores:.2f} idle) and the before run has no input_bound: {rules}")
    if not lw and not full:
        raise AssertionError(f"no loader_workers finding on the before run: {rules}")
    estimate = lw[0]["evidence"]["speedup_by_workers"].get("2") if lw else None
    if lw and estimate is None:
        raise AssertionError(f"no estimate for 2 workers in {lw[0]['evidence']}")
    rc, out, err = sb.gs("compare", before, after, "--json")
    if rc != 0:
        raise AssertionError(f"compare exited {rc}: {err}")
    import json
    cmp = json.loads(out)
    measured = cmp["runs"][1]["speedup_vs_first"]
    tb, ta = (r["figures"]["samples_per_s"] for r in cmp["runs"])
    if abs(measured - ta / tb) > 1e-6:
        raise AssertionError(f"compare's speed-up {measured} is not its throughputs' ratio {ta / tb}")
    rc, text, _ = sb.gs("compare", before, after)
    if "num_workers" not in text or (lw and "loader_workers" not in text):
        raise AssertionError(f"compare's table lacks the differing param or the finding:\n{text}")
    own = throughput(out_a) / throughput(out_b)
    if full:
        # No core was free (tests/load.sh): the doctor's model holds the other tasks' CPU theirs, while
        # the kernel shares the CPUs per task, so two workers take more of it and the job goes faster
        # than the model says (docs/testing.md, "What the loaded runs found"). The figures are printed;
        # the estimate is held to the measure only where a core was free.
        say(f"round {k}: no core was free ({idle.cores:.2f} idle): the doctor found {rules}"
            + (f", estimated {estimate:.2f}x for 2 workers" if estimate else " and advised no workers")
            + f"; measured {measured:.2f}x (the workload's own count: {own:.2f}x); not compared")
        return "full"
    ev = lw[0]["evidence"]
    err = measured / estimate - 1
    say(f"round {k}{' (in the CPU-first cgroup)' if cg else ''}: {idle.cores if idle.cores is not None else float('nan'):.2f} "
        f"cores idle on the machine; before {tb:.1f} samples/s, after {ta:.1f} samples/s: measured {measured:.2f}x "
        f"(the workload's own count: {own:.2f}x); doctor's estimate for 2 workers {estimate:.2f}x "
        f"(recommended {ev['recommended_workers']}, model step {ev['predicted_step_s'] * 1e3:.1f} ms "
        f"vs {ev['step_s'] * 1e3:.1f} ms); estimate off by {err * 100:+.1f}%")
    say(f"         before-run evidence: usable_cores={ev['usable_cores']:.2f} other_work_cores="
        f"{ev['other_work_cores']:.2f} compute_s={ev['compute_s'] * 1e3:.1f} ms load_s={ev['load_s_per_batch'] * 1e3:.1f} ms")
    return abs(err) <= TOLERANCE


RANK_ARGS = ["--seconds", os.environ.get("GS_SCENARIO_SECONDS", "10"), "--width", "8", "--batch", "32",
             "--ddp", "2"]


def rank_round(sb, k, cg):
    before, after = f"rank-before-{k}", f"rank-after-{k}"
    # The ranks' estimate (the others stop waiting for the slow rank) holds where each rank has a core
    # of its own; where other work shares the CPUs (tests/load.sh) removing the slow rank's extra work
    # frees CPU the others then share, and the measure falls short of it (1.24-1.36x against 1.99x in
    # a loaded make check). The machine's idle CPU with nothing of ours running says which.
    with IdleCores() as probe:
        time.sleep(1.0)
    shared = not cg and probe.cores is not None and probe.cores < 2 - NO_CORE
    sb.run(before, "train.py", RANK_ARGS + ["--slow-rank-work", "8"], cgroup=cg)
    sb.run(after, "train.py", RANK_ARGS + ["--slow-rank-work", "0"], cgroup=cg)
    st = [f for f in sb.report(before)["findings"] if f["rule"] == "straggler"]
    if not st:
        raise AssertionError("no straggler finding on the slow-rank run")
    estimate, ev = st[0]["speedup"], st[0]["evidence"]
    rc, out, err = sb.gs("compare", before, after, "--json")
    if rc != 0:
        raise AssertionError(f"compare exited {rc}: {err}")
    import json
    measured = json.loads(out)["runs"][1]["speedup_vs_first"]
    err = measured / estimate - 1
    say(f"rank round {k}: slow rank {ev['rank']} waits {ev['data_wait_s'] * 1e3:.1f} ms/step for data, the other "
        f"{ev['others_data_wait_s'] * 1e3:.1f} ms, step {ev['step_s'] * 1e3:.1f} ms: estimate {estimate:.2f}x, "
        f"measured {measured:.2f}x with even loaders; estimate off by {err * 100:+.1f}%"
        + (f" (in the CPU-first cgroup; {probe.cores:.2f} cores idle before the pair)" if cg and probe.cores is not None else "")
        + (f" (the CPUs were shared: {probe.cores:.2f} idle before the pair; not compared)" if shared else ""))
    if ev["rank"] != 1:
        raise AssertionError(f"the straggler named is rank {ev['rank']}, not rank 1 (the slow loader's)")
    return "full" if shared else abs(err) <= TOLERANCE


def main():
    if not have_torch():
        return skipped("pair", "the Debian python3-torch is not installed")
    sb = Sandbox(prefix="gspair-")
    cpufirst = CpuFirst().__enter__()
    try:
        cg = cpufirst if cpufirst.path else None
        if not cg:
            say(f"no CPU cgroup of the test's own ({cpufirst.why}): the estimates are held to the measures "
                "only where the machine has free cores")
            if STRICT:
                say("FAIL: make check runs as root, where the pairs run with fixed CPU; here they could not")
                return 1
        failed, retried = 0, []
        for name, round_fn in (("loader_workers", one_round), ("straggler by rank", rank_round)):
            ok = round_fn(sb, 1, cg)
            if not ok:
                say(f"RETRY {name}: the first pair missed; running it once more")
                retried.append(name)
                ok = round_fn(sb, 2, cg)
            if ok == "full":
                say(f"ok: no core was free; the doctor found what it must (its {name} estimate is compared "
                    f"only where the job has the cores to itself)")
            elif ok:
                say(f"ok: the doctor's {name} estimate is within ±{TOLERANCE * 100:.0f}% of the measured speed-up")
            else:
                say(f"FAIL: the {name} estimate missed the measured speed-up by more than ±{TOLERANCE * 100:.0f}% twice")
                failed = 1
        say(f"retried ({len(retried)} of 2 pairs): {', '.join(retried) if retried else 'none'}")
        return failed
    finally:
        cpufirst.__exit__(None, None, None)
        sb.close()
        try:
            with open(os.path.join(os.environ.get("GS_BUILD_DIR", "."), "scenario_pair.txt"), "w") as f:
                f.write("\n".join(REPORT) + "\n")
        except OSError:
            pass


if __name__ == "__main__":
    sys.exit(main())
