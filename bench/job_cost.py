#!/usr/bin/python3
"""bench/job_cost: what an agent costs the job it watches (issue 6b).

A real PyTorch CPU training run (bench/job_train.py: fixed seed, fixed steps, every core) is timed
alone, under `gpuscope run --interval 100ms` (through the Python client when clients/python/gpuscope
exists), and beside each peer agent at its usual 1 s (sadc, collectd, node-exporter + its curl
scraper, glances; started before the job, warmed up, stopped after). Variants are interleaved —
each repetition runs every variant once, in a rotated order — so drifting background load spreads
over all of them. Per run the job reports its median step time; per variant we print the median
over repetitions, the spread (min..max), and the slowdown against "alone".

usage: bench/job_cost.py [--build DIR] [--reps 4] [--steps 200] [--threads N]
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


def run_job(argv, env, log):
    r = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=log, text=True)
    for line in reversed(r.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError(f"job failed ({r.returncode}): {r.stdout[-300:]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", help="CMake build folder (default $GS_BUILD_DIR or build/)")
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--steps", type=int, default=200)
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
    log = open(os.path.join(tmp, "log"), "w")
    try:
        for rep in range(a.reps):
            order = variants[rep % len(variants):] + variants[:rep % len(variants)]
            for v in order:
                if v == "alone":
                    r = run_job(job, env, log)
                elif v == gname:
                    r = run_job([gpuscope, "run", "--quiet", "--interval", "100ms", "--store",
                                 f"sqlite://{tmp}/gs.db", "--"] + job + (["--client"] if client else []), env, log)
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
    base = bl.median_spread(res["alone"])[0]
    print(f"{'variant':<24}{'median step':>12}{'spread (run medians)':>24}{'slowdown':>10}")
    for v in variants:
        med, lo, hi = bl.median_spread(res[v])
        slow = "" if v == "alone" else f"{(med / base - 1) * 100:+.2f} %"
        print(f"{v:<24}{med:>9.2f} ms{lo:>12.2f}..{hi:.2f} ms{slow:>10}")
    for pkg in missing:
        print(f"{pkg:<24} not measured (not installed)")
    med, lo, hi = bl.median_spread(res["alone"])
    noise = (hi - lo) / med * 100
    g = (bl.median_spread(res[gname])[0] / base - 1) * 100
    print(f"target: gpuscope slowdown < 0.5 %: {g:+.2f} % -> {'met' if g < 0.5 else 'MISSED'} "
          f"(run-to-run spread of 'alone' is {noise:.1f} % of its median: differences below that are noise)")
    if not client:
        print("note: clients/python/gpuscope not found: the job ran without the client")


if __name__ == "__main__":
    main()
