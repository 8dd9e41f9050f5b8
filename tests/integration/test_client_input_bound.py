"""The Python client under the real `gpuscope run`, on an input-bound PyTorch job
(examples/input_bound.py: a costly per-sample transform, num_workers=0): the stored steps must show
most of each step waiting for data, and the DataLoader's settings (and its collate's time per batch)
must be recorded as params."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa: E402,F403

CLIENT_ENV = {"PYTHONPATH": os.path.join(SRC, "clients", "python")}


def data_wait_share(sb, run):
    rows = sb.csv("show", run, "--metric", "step.*", "--csv")
    data = sum(float(r["value"]) for r in rows if r["name"] == "step.data_s")
    total = sum(float(r["value"]) for r in rows if r["name"] == "step.total_s")
    steps = sum(1 for r in rows if r["name"] == "step.n")
    return (data / total if total else float("nan")), steps, rows


def test_input_bound_job_shows_data_wait_over_half():
    sb = Sandbox()
    try:
        sb.ok("run", "--name", "ib", "--", PYTHON, os.path.join(SRC, "examples", "input_bound.py"), "--steps", "20",
              "--seconds", "600", env=CLIENT_ENV, timeout=600)  # 20 steps however slow the machine
        share, steps, rows = data_wait_share(sb, "ib")
        print(f"     input-bound: {steps} steps, data-wait share {share:.1%}")
        check(steps == 20, f"{steps} steps stored of the job's 20")
        check(share > 0.5, f"data-wait share {share:.1%} should be > 50%")
        samples = {float(r["value"]) for r in rows if r["name"] == "step.samples"}
        check(samples == {32.0}, f"step.samples {samples}, want 32 per step")
    finally:
        sb.close()


def test_dataloader_settings_become_params():
    sb = Sandbox()
    try:
        sb.ok("run", "--name", "ibp", "--", PYTHON, os.path.join(SRC, "examples", "input_bound.py"), "--seconds", "1",
              env=CLIENT_ENV)
        params = {r["key"]: r["value"] for r in sb.csv("show", "ibp", "--params", "--csv")}
        want = {"batch_size": "32", "num_workers": "0", "pin_memory": "false", "persistent_workers": "false",
                "framework": "pytorch"}
        for k, v in want.items():
            check(params.get(k) == v, f"param {k} = {params.get(k)!r}, want {v!r} (all: {params})")
        check("prefetch_factor" in params and params.get("framework_version"), f"params: {params}")
        # num_workers=0: the collate runs in the training process and is timed (what a cached batch
        # still costs, for input_bound's estimate)
        collate = float(params.get("loader_collate_s", "nan"))
        check(0 <= collate < 1, f"param loader_collate_s = {params.get('loader_collate_s')!r}, want seconds")
    finally:
        sb.close()


if __name__ == "__main__":
    run_tests(globals())
