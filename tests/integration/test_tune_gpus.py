"""`gpuscope tune --gpus` against the simulated libnvidia-ml.so.1 (tests/gpusim) presenting four GPUs:
four trials run at once, one per GPU. Each job writes the CUDA_VISIBLE_DEVICES and the cores it was
given, then waits until all four jobs have written theirs (a barrier: sequential trials would never
get past it, and the job gives up after 60 s), so the four runs' intervals overlap by construction,
not by timing. Each trial saw only its GPU, its run records it (param tune.gpu, tag gpu=), the cores
are split between the trials, and the table and JSON say what each got. The wall time against a
sequential sweep is a benchmark (bench/tune_gpus.py), not asserted here."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import BUILD, PYTHON, Sandbox, check, run_tests  # noqa: E402

SIM = os.path.join(BUILD, "tests/gpusim/libnvidia-ml.so.1")

SCENARIO = """driver 550.54.15
device 0-3
  name NVIDIA H100 PCIe
  memory 81920MiB
  power_limit 350
  at 0 util=90 mem_util=40 mem_used=20GiB power=300 temp=60 sm_clock=1755 mem_clock=1593 pstate=0
"""

# JOB DIR N K: writes DIR/K.env (CUDA_VISIBLE_DEVICES, then the cores), waits for N such files, then
# reports 12 steps of 10 ms.
JOB = r'''
import os, socket, sys, time
d, n, k = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with open(os.path.join(d, k + ".tmp"), "w") as f:
    f.write(os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>") + "\n")
    f.write(",".join(str(c) for c in sorted(os.sched_getaffinity(0))) + "\n")
os.rename(os.path.join(d, k + ".tmp"), os.path.join(d, k + ".env"))
until = time.monotonic() + 60
while len([x for x in os.listdir(d) if x.endswith(".env")]) < n:
    if time.monotonic() > until:
        sys.exit(3)
    time.sleep(0.01)
path = os.environ.get("GPUSCOPE_SOCKET")
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
for i in range(12):
    time.sleep(0.01)
    s.sendto(f"gs1 step {i} data=0.001 compute=0.009 samples=32 t={time.monotonic():.6f}".encode(), path)
'''


def test_four_trials_run_at_once_each_on_its_own_gpu():
    check(os.path.exists(SIM), f"{SIM} is not built")
    sb = Sandbox()
    try:
        job, scn, envdir = (os.path.join(sb.dir, x) for x in ("job.py", "four.scn", "env"))
        os.mkdir(envdir)
        with open(job, "w") as f:
            f.write(JOB)
        with open(scn, "w") as f:
            f.write(SCENARIO)
        env = {"GPUSCOPE_NVML_LIB": SIM, "GPUSIM_SCENARIO": scn}
        rc, out, err = sb.gs("tune", "--json", "--name", "four", "--gpus", "all", "--steps", "8", "--warmup", "2",
                             "--param", "k=a,b,c,d", "--", PYTHON, job, envdir, "4", "{k}", env=env, timeout=200)
        check(rc == 0, f"tune exited {rc}\n{out}\n{err}")
        r = json.loads(out)
        check(r["gpus"] == ["0", "1", "2", "3"], f"--gpus all lists the simulator's four GPUs: {r['gpus']}")
        trials = r["trials"]
        check(len(trials) == 4 and all(t["status"] == "ok" for t in trials), str(trials))
        cores = set()
        for t in trials:
            with open(os.path.join(envdir, t["config"]["k"] + ".env")) as f:
                visible, mine = f.read().split("\n")[:2]
            check(visible == t["gpu"], f"trial {t['trial']}: CUDA_VISIBLE_DEVICES {visible!r}, its GPU {t['gpu']!r}")
            check(mine == ",".join(str(c) for c in sorted(parse_cpus(t["cpus"]))), f"{t}: cores {mine}")
            cores.add(mine)
            run = sb.json("report", "--json", t["run_id"])
            params = run.get("params") or {}
            check(params.get("tune.gpu") == t["gpu"] and params.get("tag.gpu") == t["gpu"], str(params))
        check(sorted(t["gpu"] for t in trials) == ["0", "1", "2", "3"], "one trial per GPU")
        ncpu = len(os.sched_getaffinity(0))
        check(len(cores) == min(4, ncpu), f"the cores are split between the trials: {cores}")
        spans = [run_span(sb, t["run_id"]) for t in trials]
        check(max(s for s, _ in spans) < min(e for _, e in spans), f"the four runs overlap: {spans}")
        rc, out, err = sb.gs("tune", "--name", "table", "--gpus", "0,1", "--steps", "4", "--warmup", "1",
                             "--param", "k=e,f", "--", PYTHON, job, envdir, "6", "{k}", env=env, timeout=200)
        check(rc == 0 and " device " in out.splitlines()[2] and " cores " in out.splitlines()[2], out)
    finally:
        sb.close()


MIG_SCENARIO = """driver 550.54.15
device 0
  name NVIDIA H100 80GB HBM3
  memory 81920MiB
  mig on
  mig_instance 1 0 3g.40gb 40448MiB
  mig_instance 2 0 3g.40gb 40448MiB
  at 0 mem_used=1GiB power=300 temp=60
"""


def test_gpus_all_on_a_mig_gpu_gives_each_trial_an_instance_by_uuid():
    check(os.path.exists(SIM), f"{SIM} is not built")
    sb = Sandbox()
    try:
        job, scn, envdir = (os.path.join(sb.dir, x) for x in ("job.py", "mig.scn", "env"))
        os.mkdir(envdir)
        with open(job, "w") as f:
            f.write(JOB)
        with open(scn, "w") as f:
            f.write(MIG_SCENARIO)
        env = {"GPUSCOPE_NVML_LIB": SIM, "GPUSIM_SCENARIO": scn}
        rc, out, err = sb.gs("tune", "--json", "--name", "mig", "--gpus", "all", "--steps", "4", "--warmup", "1",
                             "--param", "k=a,b", "--", PYTHON, job, envdir, "2", "{k}", env=env, timeout=200)
        check(rc == 0, f"tune exited {rc}\n{out}\n{err}")
        r = json.loads(out)
        check(len(r["gpus"]) == 2 and all(g.startswith("MIG-") for g in r["gpus"]), f"two MIG instances: {r['gpus']}")
        for t in r["trials"]:
            with open(os.path.join(envdir, t["config"]["k"] + ".env")) as f:
                visible = f.read().split("\n")[0]
            check(t["status"] == "ok" and visible == t["gpu"] and t["gpu"] in r["gpus"], f"{t} saw {visible!r}")
        check(r["trials"][0]["gpu"] != r["trials"][1]["gpu"], "one instance each")
    finally:
        sb.close()


def test_gpus_the_driver_does_not_have_are_refused():
    """Each --gpus entry is checked against the driver (index, GPU UUID, MIG UUID): 'nonexistent,also
    bogus', an index past the four GPUs and a UUID of no GPU are bad usage (exit 2, one line naming
    the entry) before any trial runs, as is a list where no driver is there to check it; a GPU's and a
    MIG instance's UUID as `gpuscope devices` lists them are taken."""
    check(os.path.exists(SIM), f"{SIM} is not built")
    sb = Sandbox()
    try:
        scn, mig = os.path.join(sb.dir, "four.scn"), os.path.join(sb.dir, "mig.scn")
        with open(scn, "w") as f:
            f.write(SCENARIO)
        with open(mig, "w") as f:
            f.write(MIG_SCENARIO)
        env = {"GPUSCOPE_NVML_LIB": SIM, "GPUSIM_SCENARIO": scn}
        job = ["--param", "k=a", "--", "true", "{k}"]
        for gpus, bad in (("nonexistent,also bogus", "nonexistent"), ("0,4", "4"), ("GPU-nope", "GPU-nope")):
            rc, out, err = sb.gs("tune", "--name", "bad", "--gpus", gpus, *job, env=env)
            check(rc == 2 and f"the driver has no GPU '{bad}'" in err and len(err.strip().splitlines()) == 1,
                  f"--gpus {gpus}: exit {rc}\n{err}")
        rc, out, err = sb.gs("tune", "--name", "bad", "--gpus", "0", *job,
                             env={"GPUSCOPE_NVML_LIB": os.path.join(sb.dir, "no-such-libnvidia-ml.so.1")})
        check(rc == 2 and "no GPU driver to check them against" in err, f"no driver: exit {rc}\n{err}")
        check(not os.path.exists(sb.db) or not sb.json("runs", "--json"), "no trial ran")
        uuid = json.loads(sb.ok("devices", "--json", env=env))
        menv = {"GPUSCOPE_NVML_LIB": SIM, "GPUSIM_SCENARIO": mig}
        muuid = json.loads(sb.ok("devices", "--json", env=menv))
        gpu = uuid["devices"][1]["uuid"]
        inst = muuid["devices"][0]["mig_instances"][0]["uuid"]
        for e, g in ((env, gpu), (menv, inst)):
            rc, out, err = sb.gs("tune", "--name", "good", "--steps", "1", "--warmup", "0", "--gpus", g, *job, env=e)
            check(rc != 2 and "--gpus" not in err, f"--gpus {g}: exit {rc}\n{err}")
    finally:
        sb.close()


def parse_cpus(s):
    out = []
    for part in s.split(","):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out


def run_span(sb, run_id):
    r = sb.json("report", "--json", run_id)
    run = r.get("run", r)
    return run["start_wall_ns"], run["end_wall_ns"]


if __name__ == "__main__":
    run_tests(globals())
