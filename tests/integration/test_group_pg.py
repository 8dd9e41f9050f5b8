"""One run across nodes: several agents on this machine, each a separate `gpuscope run --group` of
one job writing to one PostgreSQL server (tests/pg/pgserver.py), each in its own UTS namespace so it
records a host name of its own (nodea, nodeb, nodec), each on simulated GPUs (tests/gpusim). nodeb's
loader is slower and busy on the CPU (its rank spins 40 ms for data, the others sleep 5 ms); nodec's
first GPU runs at 1100 MHz against 1980. The nodes start half a second apart, so nodeb's run is not
the group's earliest. The group's report names both, with their hosts, and reads the host side
(the input rules) on nodeb; `runs --group` lists the group; the GPU rules count the group's six GPUs,
and underused_gpus the second group's idle node (2 of 4); `compare GROUP GROUP` reads two groups, and
`compare --html` / `report --html` write the web page of groups (a group beside a plain run too).
A third group is three runs on this machine's one host (one task per GPU), each seeing the node's
four GPUs: the group counts four GPUs (by UUID), the host's series once, each run's job series apart
(host=H,run=ID), and a GPU used by one rank's process is that rank's."""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "pg"))
from gstest import *  # noqa: E402,F401
from pgserver import PgServer  # noqa: E402

SIM = os.path.join(BUILD, "tests/gpusim/libnvidia-ml.so.1")

# Two GPUs; CLOCK is GPU 0's SM clock (1980 on a healthy node); NODE makes the UUIDs the node's own
# (every GPU has its own UUID: the group tells GPUs apart by it).
SCENARIO = """driver 550.54.15
device 0-1
  name NVIDIA H200
  cc 9.0
  memory 143771MiB
  power_limit 700
  max_clocks 1980 3201
  at 0 util=UTIL mem_util=60 mem_used=100GiB power=600 temp=60 sm_clock=1980 mem_clock=3201 throttle=0 procs=none
device 0
  uuid GPU-NODE-0
  at 0 sm_clock=CLOCK
device 1
  uuid GPU-NODE-1
"""

# One node's four GPUs, seen whole by every run on it (NVML ignores CUDA_VISIBLE_DEVICES); GPU 1 runs
# at 1100 MHz. Each run's scenario lists its own job ($JOBPID) on its GPU (GPU RANK) only: the
# simulator shows an agent its own child, where a real driver lists every run's process.
SHARED = """driver 550.54.15
device 0-3
  name NVIDIA H200
  cc 9.0
  memory 143771MiB
  power_limit 700
  max_clocks 1980 3201
  at 0 util=95 mem_util=60 mem_used=100GiB power=600 temp=60 sm_clock=1980 mem_clock=3201 throttle=0 procs=none
device 1
  at 0 sm_clock=1100
device RANK
  at 0 procs=$JOBPID:10GiB:90
"""

# gs1 steps of one rank: job.py RANK DATA COMPUTE N SPIN (SPIN 1: the data wait is CPU work)
STEP_JOB = r'''
import os, socket, sys, time
rank, data, comp, n = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
spin = sys.argv[5] == "1"
path = os.environ.get("GPUSCOPE_SOCKET")
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
def send(line):
    if path:
        s.sendto(line.encode(), path)
send("gs1 param batch_size 32")
for i in range(n):
    t0 = time.monotonic()
    if spin:
        while time.monotonic() - t0 < data:
            pass
    else:
        time.sleep(data)
    t1 = time.monotonic()
    while time.monotonic() - t1 < comp:
        pass
    t2 = time.monotonic()
    send(f"gs1 step {i} data={t1 - t0:.6f} compute={t2 - t1:.6f} samples=32 rank={rank} t={t2:.6f}")
'''


def namespace_prefix():
    """unshare's arguments for a UTS namespace of one's own (a user namespace too when not root)."""
    return ["unshare", "-u"] if os.geteuid() == 0 else ["unshare", "-r", "-u"]


def write(sb, name, text):
    path = os.path.join(sb.dir, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def run_group(sb, pg, group, nodes, steps):
    """Starts one agent per node, in order, half a second apart (so the first is the earliest run);
    nodes: (host, rank, data_s, gpu0_clock[, util[, spin]]). Waits for all."""
    job = write(sb, "job.py", STEP_JOB)
    procs = []
    for host, rank, data, clock, *more in nodes:
        util, spin = (more + [95, 0])[:2] if len(more) < 2 else more
        scn = write(sb, f"{group}-{host}.scn",
                    SCENARIO.replace("CLOCK", str(clock)).replace("UTIL", str(util)).replace("NODE", host))
        if procs:
            time.sleep(0.5)
        env = pg.env(sb.env)
        env.update({"GPUSCOPE_NVML_LIB": SIM, "GPUSIM_SCENARIO": scn, "GPUSCOPE_SPOOL_DIR": sb.dir + "/spool"})
        cmd = [*namespace_prefix(), "sh", "-c", 'hostname "$0" && exec "$@"', host, BIN, "run", "--quiet",
               "--group", group, "--name", f"{group}-{host}", "--interval", "100ms", "--", PYTHON, job, str(rank),
               str(data), "0.03", str(steps), str(spin)]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for p in procs:
        out, err = p.communicate(timeout=180)
        check(p.returncode == 0, f"an agent of {group} exited {p.returncode}:\n{err}")


def run_shared(sb, pg, group, ranks, steps):
    """One run per rank on this machine's own host (one task per GPU, as srun --ntasks-per-node), all
    at once, each seeing the node's four GPUs (SHARED). Waits for all."""
    job = write(sb, "job.py", STEP_JOB)
    procs = []
    for rank in range(ranks):
        env = pg.env(sb.env)
        env.update({"GPUSCOPE_NVML_LIB": SIM, "GPUSIM_SCENARIO": write(sb, f"{group}-{rank}.scn",
                    SHARED.replace("RANK", str(rank))), "GPUSCOPE_SPOOL_DIR": sb.dir + "/spool"})
        cmd = [BIN, "run", "--quiet", "--group", group, "--name", f"{group}-{rank}", "--interval", "100ms", "--",
               PYTHON, job, str(rank), "0.005", "0.03", str(steps), "0"]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for p in procs:
        out, err = p.communicate(timeout=180)
        check(p.returncode == 0, f"a run of {group} exited {p.returncode}:\n{err}")


_made = []


def setup():
    if _made:
        return _made[0]
    pg = PgServer()
    sb = Sandbox()
    sb.env = pg.env(sb.env)
    sb.env["GPUSCOPE_STORE"] = pg.url("group")
    _made.append((pg, sb))
    # the database made first, so no node's start waits for it (the nodes' runs start in order)
    sb.ok("run", "--quiet", "--name", "make-the-store", "--", "true")
    run_group(sb, pg, "job1",
              [("nodea", 0, 0.005, 1980), ("nodeb", 1, 0.040, 1980, 95, 1), ("nodec", 2, 0.005, 1100)], 100)
    # job2: nodeb's GPUs stay idle
    run_group(sb, pg, "job2", [("nodea", 0, 0.005, 1980), ("nodeb", 1, 0.005, 1980, 0)], 60)
    # job3: three runs on one host, one per GPU, sharing its four GPUs
    run_shared(sb, pg, "job3", 3, 40)
    return _made[0]


def test_runs_lists_the_group_on_its_hosts():
    pg, sb = setup()
    out = sb.ok("runs", "--group", "job1")
    check("group job1: 3 runs on 3 hosts" in out, f"runs --group:\n{out}")
    runs = [r for r in sb.json("runs", "--json") if r["group"] == "job1"]
    check(sorted(r["host"] for r in runs) == ["nodea", "nodeb", "nodec"], f"hosts: {runs}")


def test_group_report_names_the_slow_loader_and_the_slow_gpu_with_their_hosts():
    pg, sb = setup()
    rep = sb.json("report", "job1", "--json")
    strag = [f for f in rep["findings"] if f["rule"] == "straggler"]
    titles = " | ".join(f["title"] for f in strag)
    hosts = sorted(f["evidence"].get("host", "") for f in strag)
    check(hosts == ["nodeb", "nodec"], f"straggler findings do not name nodeb and nodec: {titles}")
    by_rank = [f for f in strag if "rank" in f["evidence"]]
    check(len(by_rank) == 1 and by_rank[0]["evidence"]["rank"] == 1, f"no rank 1 straggler: {titles}")
    by_gpu = [f for f in strag if "gpu" in f["evidence"]]
    check(len(by_gpu) == 1 and by_gpu[0]["evidence"].get("host_gpu") == 0 and "GPU 0 of host nodec" in titles,
          f"not nodec's GPU 0: {titles}")
    text = sb.ok("report", "job1")
    check("host nodeb" in text and "of host nodec" in text, f"the text report does not name both hosts:\n{text}")


def test_group_gpu_rules_count_every_gpu_of_the_group():
    pg, sb = setup()
    rep = sb.json("report", "job1", "--json")
    gpu = [f for f in rep["findings"] if f["rule"] == "straggler" and "gpu" in f["evidence"]]
    check(gpu and gpu[0]["evidence"]["gpus_used"] == 6, f"the group's GPUs are not all counted: {gpu}")
    series = sb.ok("report", "job1", "--json")
    check('"host"' in series, "no host in the group report")


def test_underused_gpus_counts_the_group_gpus():
    pg, sb = setup()
    rep = sb.json("report", "job2", "--json")
    under = [f for f in rep["findings"] if f["rule"] == "underused_gpus"]
    check(len(under) == 1, f"no underused_gpus finding for job2: {[f['rule'] for f in rep['findings']]}")
    ev = under[0]["evidence"]
    check(ev["gpus"] == 4 and ev["idle"] == 2, f"not 2 of the group's 4 GPUs idle: {ev}")


def test_compare_two_groups():
    pg, sb = setup()
    rc, out, err = sb.gs("compare", "job1", "job2", "--json")
    check(rc == 0, f"compare job1 job2 exited {rc}: {err}")
    doc = json.loads(out)
    check("job1" in out and "job2" in out, f"compare does not name both groups: {out[:400]}")
    check(doc, "empty compare")


def test_host_side_is_read_on_the_node_that_holds_the_others_back():
    pg, sb = setup()
    runs = {r["host"]: r for r in sb.json("runs", "--json") if r["group"] == "job1"}
    first = min(runs.values(), key=lambda r: r["start_wall_ns"])
    check(first["host"] != "nodeb", f"nodeb's run is the group's earliest: {first}")
    rep = sb.json("report", "job1", "--json")
    rules = ("input_bound", "loader_workers", "input_latency", "io_bound")
    inp = [f for f in rep["findings"] if f["rule"] in rules]
    titles = " | ".join(f"{f['rule']}: {f['title']}" for f in rep["findings"])
    check(inp, f"no input finding for nodeb's loader: {titles}")
    for f in inp:
        ev = f["evidence"]
        check(ev.get("host") == "nodeb" and ev.get("rank") == 1, f"not read on nodeb (rank 1): {f}")
        check("(host nodeb, rank 1)" in f["title"], f"the title does not name nodeb: {f['title']}")
        # nodeb's rank's data wait (40 ms), not rank 0's (5 ms) on nodea
        check(ev.get("data_wait_s") is not None and ev["data_wait_s"] > 0.02, f"not nodeb's data wait: {ev}")
    ib = [f for f in inp if f["rule"] == "input_bound"]
    check(ib and isinstance(ib[0]["evidence"].get("job_cpu_cores"), (int, float)),
          f"nodeb's host-labelled job series were not found: {ib}")
    text = sb.ok("report", "job1")
    check("(host nodeb, rank 1)" in text, f"the text report does not name nodeb's input finding:\n{text}")


def test_runs_on_one_host_count_its_gpus_and_host_once_and_keep_each_job():
    pg, sb = setup()
    runs = [r for r in sb.json("runs", "--json") if r["group"] == "job3"]
    check(len(runs) == 3 and len({r["host"] for r in runs}) == 1, f"not three runs on one host: {runs}")
    host = runs[0]["host"]
    doc = embed_of(html_of(sb, "report", "job3"))["runs"]["job3"]
    check(len(doc["gpus"]) == 4, f"not the node's 4 GPUs (3 runs saw them): {len(doc['gpus'])}")
    series = [(x["name"], x["labels"]) for x in doc["series"]]
    check(series.count(("host.load1", f"host={host}")) == 1 and
          sum(1 for n, _ in series if n == "host.load1") == 1, f"the host's series not once: {series[:20]}")
    check(sum(1 for n, lab in series if n == "gpu.util_pct") == 4, "GPU series repeated per run")
    trees = sorted(lab for n, lab in series if n == "tree.cpu_pct")
    check(trees == sorted(f"host={host},run={r['id']}" for r in runs), f"not each run's job series: {trees}")
    params = doc["params"]
    check(params.get("gpu.count") == "4" and params.get("group.gpu.1.rank") == "1" and
          params.get("group.gpu.3.rank") is None, f"GPUs not counted or not given their rank: {params}")
    rep = sb.json("report", "job3", "--json")
    strag = [f for f in rep["findings"] if f["rule"] == "straggler"]
    check(len(strag) == 1 and strag[0]["evidence"]["gpus_used"] == 4 and strag[0]["evidence"]["gpu_rank"] == 1 and
          f"(GPU 1 of host {host}, rank 1)" in strag[0]["title"], f"not GPU 1 of rank 1 among 4: {strag}")
    figs = rep["figures"]
    check(figs["gpus"] == 4 and figs["host_cpu_pct"] is not None and figs["job_cpu_pct"] is not None,
          f"the group's figures: {figs}")


def html_of(sb, *args):
    path = os.path.join(sb.dir, "page.html")
    if os.path.exists(path):
        os.unlink(path)
    out = sb.ok(*args, "--html", path)
    check("wrote" in out and os.path.exists(path), f"{' '.join(args)} --html wrote nothing: {out}")
    with open(path) as f:
        return f.read()


def embed_of(page):
    start = page.index("window.GS_EMBED = ") + len("window.GS_EMBED = ")
    return json.loads(page[start:page.index(";</script>", start)])


def test_compare_html_of_two_groups_names_them_their_hosts_and_findings():
    pg, sb = setup()
    doc = embed_of(html_of(sb, "compare", "job1", "job2"))
    cmp = doc["compare"]
    check([r["id"] for r in cmp["runs"]] == ["job1", "job2"], f"not both groups: {[r['id'] for r in cmp['runs']]}")
    check(cmp["runs"][0]["host"] == "nodea, nodeb, nodec" and cmp["runs"][0]["gpus"] == 6,
          f"not job1's three hosts and six GPUs: {cmp['runs'][0]}")
    rules = {f["rule"]: f["in"] for f in cmp["findings"]}
    check(rules.get("straggler") == [True, False] and rules.get("underused_gpus", [None, True])[1],
          f"the findings are not job1's straggler and job2's idle GPUs: {cmp['findings']}")
    check(set(doc["series"]) == {"job1", "job2"} and doc["series"]["job1"], f"no series of the groups: {doc['series'].keys()}")


def test_compare_html_of_a_group_beside_a_plain_run():
    pg, sb = setup()
    run = [r for r in sb.json("runs", "--json") if r["name"] == "job2-nodea"][0]
    doc = embed_of(html_of(sb, "compare", "job1", run["id"]))
    check([r["id"] for r in doc["compare"]["runs"]] == ["job1", run["id"]], f"runs: {doc['compare']['runs']}")
    check(doc["compare"]["runs"][1]["host"] == "nodea", f"not the plain run's host: {doc['compare']['runs'][1]}")


def test_report_html_of_a_group_shows_its_hosts_gpus_and_findings():
    pg, sb = setup()
    page = html_of(sb, "report", "job1")
    doc = embed_of(page)
    run = doc["runs"]["job1"]
    check(run["run"]["host"] == "nodea, nodeb, nodec", f"not the group's hosts: {run['run']['host']}")
    check(len(run["gpus"]) == 6, f"not the group's six GPUs: {run['gpus']}")
    check(run["params"].get("group.gpu.5.host") == "nodec", "no host of GPU 5 in the page's params")
    titles = " | ".join(f["title"] for f in run["findings"])
    check("GPU 0 of host nodec" in titles and "(host nodeb" in titles, f"findings without their hosts: {titles}")
    check("<title>gpuscope: job1</title>" in page, "the page is not titled with the group")


if __name__ == "__main__":
    import signal
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a ctest timeout still stops the servers
    probe = subprocess.run([*namespace_prefix(), "true"], capture_output=True, text=True)
    if probe.returncode != 0:  # a ctest skip (a failure under make check), with its reason
        skip_script(f"no UTS namespace for the simulated nodes ({' '.join(namespace_prefix())}: "
                    f"{probe.stderr.strip()}); run as root or enable unprivileged user namespaces")
    try:
        run_tests(globals())
    finally:
        for pg, sb in _made:
            sb.close()
            pg.close()
