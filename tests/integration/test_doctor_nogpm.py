"""The doctor on a GPU without SM activity readings (no GPM: V100, A100, A10, L4, T4 — most GPUs that
train today), through the simulated NVML: an A100 busy 96 % of the time with 12 of 80 GiB in use,
fed by a job that never waits for data. The memory controller's share is no stand-in for how full the
SMs are, so at mem_util 30 % and at 90 % no batch finding claims more than the host overhead the run
measured, and the report says the GPU-side fill is unknown and prints the two-trial `gpuscope tune`
that measures it, with the job's batch size (docs/diagnosis.md, batch_too_small)."""
from gstest import *

SIM = os.path.join(BUILD, "tests/gpusim/libnvidia-ml.so.1")
SCN = os.path.join(SRC, "tests/gpusim/scenarios")
TUNE = "gpuscope tune --param batch_size=32,128 -- "


def _run(sb, name, scn, precision):
    env = {"GPUSCOPE_NVML_LIB": SIM, "GPUSIM_SCENARIO": os.path.join(SCN, scn)}
    # no data wait at all (sleep 0): the loop is never input-bound, however loaded the machine
    sb.ok("run", "--quiet", "--name", name, "--",
          *sb.step_job(0, 0.02, 50, "batch_size=32", f"precision={precision}", "pin_memory=True"), env=env)


def _setup(sb):
    _run(sb, "mu30", "a100_nogpm_mu30.scn", "bf16")
    _run(sb, "mu90", "a100_nogpm_mu90.scn", "fp32")


SB = shared_sandbox(_setup)


def _findings(name):
    return SB().json("report", name, "--json")["findings"]


def test_no_finding_claims_more_than_the_measured_host_overhead_at_any_mem_util():
    for name in ("mu30", "mu90"):
        findings = _findings(name)
        check(findings, f"{name}: no findings")
        rules = [f["rule"] for f in findings]
        check("batch_too_small" not in rules, f"{name}: {rules}")
        for f in findings:
            if f["rule"] == "mixed_precision":  # AMP's gain on GPU work, not a batch's (the fp32 run)
                continue
            # the GPU is busy 96 % of the time: nothing else can win back more than the other 4 %
            check(f["speedup"] <= 1 / 0.96 + 1e-6, f"{name}: {f['rule']} claims {f['speedup']}")


def test_the_report_says_the_fill_is_unknown_and_prints_the_tune_command():
    # healthy (mu30): the verdict's fix; with another finding (mu90, fp32): the report's notes
    for name, where in (("mu30", "fix:"), ("mu90", "not judged: batch_too_small")):
        out = SB().ok("report", name)
        flat = " ".join(out.split())
        check(where in out, f"{name}: no {where!r} in\n{out}")
        check("GPU-side fill of a bigger batch is unknown" in flat, f"{name}:\n{out}")
        check(TUNE in flat and "batch_size={batch_size} precision=" in flat, f"{name}:\n{out}")


if __name__ == "__main__":
    run_tests(globals())
