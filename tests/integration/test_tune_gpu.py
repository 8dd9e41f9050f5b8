"""`gpuscope tune` with GPUs (the simulated libnvidia-ml.so.1 of tests/gpusim): each trial's GPU
utilisation, peak GPU memory against the GPU's total and energy per sample come from the run's NVML
series, and a configuration whose peak passes 90 % of GPU memory is not the winner even when it is
the fastest (the winner keeps a memory margin)."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import BUILD, PYTHON, SRC, Sandbox, check, run_tests  # noqa: E402

SIM = os.path.join(BUILD, "tests/gpusim/libnvidia-ml.so.1")
GIB = 1 << 30

# JOB PRE DATA COMPUTE N: sleeps PRE seconds, then N steps of DATA s waiting and COMPUTE s spinning;
# DATA "fast-if-late" is 0.002 s after a pre-sleep and 0.08 s without one (steps of 12 ms against
# 90 ms: far enough apart that a loaded machine, or an ASan build of the agent, cannot swap them).
JOB = r'''
import os, socket, sys, time
pre, comp, n = float(sys.argv[1]), float(sys.argv[3]), int(sys.argv[4])
data = (0.002 if pre else 0.08) if sys.argv[2] == "fast-if-late" else float(sys.argv[2])
path = os.environ.get("GPUSCOPE_SOCKET")
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
time.sleep(pre)
for i in range(n):
    t0 = time.monotonic(); time.sleep(data); t1 = time.monotonic()
    while time.monotonic() - t1 < comp:
        pass
    t2 = time.monotonic()
    if path:
        s.sendto(f"gs1 step {i} data={t1 - t0:.6f} compute={t2 - t1:.6f} samples=32 t={t2:.6f}".encode(), path)
'''

# One 80 GiB GPU at 50 % memory; from 2.5 s into the run the job holds 97 % of it.
SCENARIO = """driver 550.54.15
device 0
  name NVIDIA H100 PCIe
  cc 9.0
  memory 81920MiB
  power_limit 350
  max_clocks 1755 1593
  gpm off
  mig off
  at 0 util=90 mem_util=40 mem_used=40GiB power=300 temp=60 sm_clock=1755 mem_clock=1593 throttle=0 pstate=0
  at 2.5 mem_used=79.5GiB
"""


def tune(sb, scenario, *args):
    check(os.path.exists(SIM), f"{SIM} is not built")
    job = os.path.join(sb.dir, "job.py")
    with open(job, "w") as f:
        f.write(JOB)
    env = {"GPUSCOPE_NVML_LIB": SIM, "GPUSIM_SCENARIO": scenario}
    sb.env.pop("GPUSIM_JOBPID", None)
    # the last four arguments are the job's: PRE DATA COMPUTE N
    rc, out, err = sb.gs("tune", "--json", *args[:-4], "--", PYTHON, job, *args[-4:], env=env, timeout=120)
    check(rc == 0, f"tune exited {rc}\n{out}\n{err}")
    return json.loads(out)


def test_gpu_columns_come_from_the_runs_nvml_series():
    sb = Sandbox()
    try:
        scn = os.path.join(SRC, "tests/gpusim/scenarios/busy8_h200.scn")
        r = tune(sb, scn, "--steps", "8", "--warmup", "2", "--param", "data=0.01,0.03", "0", "{data}", "0.02", "200")
        check(len(r["trials"]) == 2, f"one trial per value of data: {r['trials']}")
        for t in r["trials"]:
            check(t["status"] == "ok", str(t))
            check(abs(t["gpu_util_pct"] - 97) < 1, f"GPU util {t['gpu_util_pct']}")
            check(t["peak_mem_bytes"] == 120 * GIB and t["mem_limit_bytes"] == 143771 * (1 << 20), str(t))
            check(t["margin_ok"] is True, "120 GiB of 140.4 GiB is under 90 %")
            watts = t["energy_per_sample_j"] * t["rate"]  # 8 GPUs at 640 W in the scenario
            check(abs(watts - 8 * 640) < 0.05 * 8 * 640, f"energy per sample x samples/s = {watts} W")
    finally:
        sb.close()


def test_fastest_configuration_over_the_memory_margin_is_not_the_winner():
    sb = Sandbox()
    try:
        scn = os.path.join(sb.dir, "margin.scn")
        with open(scn, "w") as f:
            f.write(SCENARIO)
        # pre=3: fast steps, but only after the memory peak (97 %) at 2.5 s; pre=0: slower steps,
        # done long before it (50 %).
        r = tune(sb, scn, "--steps", "8", "--warmup", "2", "--param", "pre=3,0",
                 "{pre}", "fast-if-late", "0.01", "200")
        fast = r["trials"][0]
        check(fast["status"] == "ok" and fast["margin_ok"] is False, str(fast))
        check(fast["peak_mem_bytes"] > 0.9 * fast["mem_limit_bytes"], str(fast))
        win = r["trials"][r["recommended"] - 1]
        check(win["config"]["pre"] == "0" and win["margin_ok"] is True, f"winner {win}")
        check(fast["rate"] > win["rate"], "the excluded configuration was the fastest")
    finally:
        sb.close()


if __name__ == "__main__":
    run_tests(globals())
