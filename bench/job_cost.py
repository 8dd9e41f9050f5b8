#!/usr/bin/python3
"""bench/job_cost: what an agent costs the job it watches (issue 6b).

A real PyTorch CPU training run (bench/job_train.py: fixed seed, fixed steps, every core) is timed
alone, under `gpuscope run --interval 100ms` (through the Python client when clients/python/gpuscope
exists), and beside each peer agent at its usual 1 s (sadc, collectd, node-exporter + its curl
scraper, glances; started before the job, warmed up, stopped after). Variants are interleaved —
each repetition runs every variant once, in a rotated order — so drifting background load spreads
over all of them. Per run the job reports its median step time. Per variant we print the median
over repetitions and its spread (min..max), the slowdown as the median of paired ratios — each
run against the "alone" run of the same repetition, minutes apart at most — with their spread, and
the best-run slowdown (fastest run against fastest "alone": other load only ever adds time).
Timing noise on a shared machine is far larger than 0.5 %, so for gpuscope we also print what it
can at most take from the job: the agent's own CPU time while the training loop runs (all its
threads, from /proc/PID/task/*/schedstat) as a share of the machine's CPU time over that loop.

usage: bench/job_cost.py [--build DIR] [--reps 6] [--steps 100] [--threads N]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import agents  # noqa: E402
import benchlib as bl  # noqa: E402

PYTHON = "/usr/bin/python3"  # Debian's, with python3-torch


def peer_argv(name, tmp, url_port):
    if name == "sadc":
        return [["/usr/lib/sysstat/sadc", "-S", "DISK", "1", "100000", os.path.join(tmp, "sa.data")]]
    if name == "collectd":
        return [[shutil.which("collectd"), "-f", "-C", agents.collectd_conf(tmp, 1)]]
    if name == "node-exporter":
        url = f"http://127.0.0.1:{url_port}/metrics"
        return [["prometheus-node-exporter", f"--web.listen-address=127.0.0.1:{url_port}"],
                ["/bin/sh", "-c", f"sleep 2; while :; do curl -s -o /dev/null {url}; sleep 1; done"]]
    if name == "glances":
        return [["glances", "--quiet", "--export", "csv", "--export-csv-file", os.path.join(tmp, "g.csv"),
                 "-t", "1"]]
    raise ValueError(name)


WARM = {"sadc": 2, "collectd": 3, "node-exporter": 4, "glances": 10}


def run_job(argv, env, log, agent=False):
    """Runs the job (argv may be gpuscope running it); returns its JSON result, with "agent_cpu_s":
    the CPU of argv's own process (gpuscope) during the training loop when agent is set."""
    p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=log, text=True)
    res, c0, out = None, None, []
    for line in p.stdout:
        out.append(line)
        if not line.startswith("{"):
            continue
        d = json.loads(line)
        if d.get("event") == "start":
            c0 = bl.task_cpu_ns(p.pid) if agent else None
        else:
            res = d
            if agent and c0 is not None:
                res["agent_cpu_s"] = (bl.task_cpu_ns(p.pid) - c0) / 1e9
    p.wait()
    if res is None:
        raise RuntimeError(f"job failed ({p.returncode}): {''.join(out)[-300:]}")
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", help="CMake build folder (default $GS_BUILD_DIR or build/)")
    ap.add_argument("--reps", type=int, default=6)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--threads", type=int, default=0, help="job threads (default: every core)")
    ap.add_argument("--no-peers", action="store_true", help="only alone and gpuscope")
    a = ap.parse_args()
    build = bl.build_dir(a.build)
    gpuscope = bl.program(build, "gpuscope")
    if subprocess.run([PYTHON, "-c", "import torch"], capture_output=True).returncode:
        sys.exit(f"job_cost: {PYTHON} cannot import torch (apt-get install python3-torch)")
    client_dir = os.path.join(bl.REPO, "clients/python")
    client = os.path.isdir(os.path.join(client_dir, "gpuscope"))
    missing = [] if a.no_peers else bl.ensure_packages([p for p, _ in agents.PEERS], [b for _, b in agents.PEERS])
    peers = [] if a.no_peers else [p for p, pkg in (("sadc", "sysstat"), ("collectd", "collectd-core"),
                                                    ("node-exporter", "prometheus-node-exporter"),
                                                    ("glances", "glances")) if pkg not in missing]
    gname = "gpuscope 100ms" + (" +client" if client else "")
    variants = ["alone", gname] + peers
    job = [PYTHON, os.path.join(bl.REPO, "bench/job_train.py"), "--steps", str(a.steps)]
    if a.threads:
        job += ["--threads", str(a.threads)]
    tmp = tempfile.mkdtemp(prefix="gs-jobcost-")
    env = dict(os.environ)
    if client:
        env["PYTHONPATH"] = client_dir + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    print(f"job_cost: bench/job_train.py ({a.steps} timed steps, MLP 784-256-256-10, batch 128, "
          f"{a.threads or os.cpu_count()} threads), {a.reps} repetitions, variants interleaved")
    print(f"machine: {bl.machine_facts()}", flush=True)
    res = {v: [] for v in variants}
    agent_share = []
    log = open(os.path.join(tmp, "log"), "w")
    try:
        for rep in range(a.reps):
            order = variants[rep % len(variants):] + variants[:rep % len(variants)]
            for v in order:
                if v == "alone":
                    r = run_job(job, env, log)
                elif v == gname:
                    r = run_job([gpuscope, "run", "--quiet", "--interval", "100ms", "--store",
                                 f"sqlite://{tmp}/gs.db", "--"] + job + (["--client"] if client else []), env, log,
                                agent=True)
                    agent_share.append(r["agent_cpu_s"] / (r["total_s"] * os.cpu_count()))
                else:
                    procs = [subprocess.Popen(p, stdout=log, stderr=log)
                             for p in peer_argv(v, tmp, agents.free_port())]
                    time.sleep(WARM[v])
                    try:
                        r = run_job(job, env, log)
                    finally:
                        for p in procs:
                            bl.stop(p)
                res[v].append(r["median_ms"])
                print(f"  rep {rep + 1}/{a.reps} {v:<22} median step {r['median_ms']:.2f} ms", file=sys.stderr,
                      flush=True)
    finally:
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{'variant':<24}{'median step':>12}{'spread (run medians)':>24}{'slowdown':>10}  {'spread (paired)':<17}"
          f"best run")
    slow = {}
    for v in variants:
        med, lo, hi = bl.median_spread(res[v])
        if v == "alone":
            print(f"{v:<24}{med:>9.2f} ms{lo:>12.2f}..{hi:.2f} ms")
            continue
        pairs = [(x / a - 1) * 100 for x, a in zip(res[v], res["alone"])]
        slow[v] = bl.median_spread(pairs)
        s, slo, shi = slow[v]
        best = (lo / min(res["alone"]) - 1) * 100
        print(f"{v:<24}{med:>9.2f} ms{lo:>12.2f}..{hi:.2f} ms{s:>+8.2f} %  {f'{slo:+.1f}..{shi:+.1f} %':<17}"
              f"{best:+.2f} %")
    for pkg in missing:
        print(f"{pkg:<24} not measured (not installed)")
    med, lo, hi = bl.median_spread(res["alone"])
    noise = (hi - lo) / med * 100
    g = slow[gname][0]
    gbest = (min(res[gname]) / min(res["alone"]) - 1) * 100
    share = bl.median_spread(agent_share)[0] * 100
    print(f"gpuscope's own CPU during the training loop: {share:.3f} % of the machine's CPU time (median of "
          f"{len(agent_share)} runs): the most it can take from a job that keeps every core busy")
    print(f"target: gpuscope slowdown < 0.5 %: CPU bound {share:.3f} % -> {'met' if share < 0.5 else 'MISSED'}; "
          f"timed {g:+.2f} % (best run {gbest:+.2f} %), {'within' if abs(g) < noise else 'beyond'} the noise: the "
          f"'alone' runs spread over {noise:.1f} % of their median")
    if not client:
        print("note: clients/python/gpuscope not found: the job ran without the client")


if __name__ == "__main__":
    main()
